//! Counts as people read them: `1 turn`, `2 turns`. Every message that
//! counts something uses [`count`] (or [`plural`] for a noun apart from its
//! number), so no output says `1 turns`. It lives in `sys`, the bottom
//! layer, because commands, the runner and config all print counts and may
//! only import below themselves; it owns no other wording.

/// `one` when `n` is 1, else `many`.
pub(crate) fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// `N NOUN`, with the noun's plural unless `n` is 1: `count(1, "turn",
/// "turns")` is `1 turn`.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", plural(n, one, many))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(0, "turn", "turns"), "0 turns");
        assert_eq!(count(1, "turn", "turns"), "1 turn");
        assert_eq!(
            count(2, "selected task", "selected tasks"),
            "2 selected tasks"
        );
        assert_eq!(plural(1, "has", "have"), "has");
    }
}

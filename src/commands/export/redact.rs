//! Redaction of secret-looking strings in exported conversations: API keys
//! (`sk-...`, `sk-ant-...`, `sk-proj-...`), `Bearer` tokens, AWS access key
//! ids and secret keys, Hugging Face (`hf_...`) and GitHub tokens, each
//! replaced by `[REDACTED]`. It owns the patterns, not where they are
//! applied (`export` runs them over every text of a conversation).
//!
//! onebash's own keys never reach a trajectory (they leave the environment
//! before any command starts, and requests are recorded without their
//! headers), so what this catches is what a task's repository, its setup
//! or the agent's commands printed: a training set must not carry it.

use std::sync::LazyLock;

use regex::Regex;

pub(super) const REDACTED: &str = "[REDACTED]";

/// Each pattern, and the group it replaces (0: the whole match).
static PATTERNS: LazyLock<Vec<(Regex, usize)>> = LazyLock::new(|| {
    [
        // OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) keys.
        (r"\bsk-[A-Za-z0-9_-]{16,}", 0),
        (r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{16,})", 1),
        // AWS access key ids, and the secret key where it is named.
        (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", 0),
        (
            r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})"#,
            1,
        ),
        (r"\bhf_[A-Za-z0-9]{30,}", 0),
        (
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
            0,
        ),
    ]
    .into_iter()
    .map(|(pattern, group)| {
        // The patterns are constants, checked by the tests below: an
        // invalid one is a bug found before any release.
        let regex = Regex::new(pattern).expect("a valid redaction pattern");
        (regex, group)
    })
    .collect()
});

/// Replaces every secret-looking string in `text`; returns how many.
pub(super) fn redact(text: &mut String) -> usize {
    let mut count = 0;
    for (regex, group) in PATTERNS.iter() {
        // Spans first, then replaced from the end, so the offsets of the
        // earlier ones still hold.
        let spans: Vec<(usize, usize)> = regex
            .captures_iter(text)
            .filter_map(|caps| caps.get(*group).map(|m| (m.start(), m.end())))
            .collect();
        for &(start, end) in spans.iter().rev() {
            text.replace_range(start..end, REDACTED);
        }
        count += spans.len();
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_strings_are_redacted_and_the_rest_kept() {
        let cases = [
            (
                "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx done",
                "OPENAI_API_KEY=[REDACTED] done",
            ),
            (
                "key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA_bb-cc\n",
                "key [REDACTED]\n",
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc",
                "Authorization: Bearer [REDACTED]",
            ),
            ("id AKIAIOSFODNN7EXAMPLE,", "id [REDACTED],"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = [REDACTED]",
            ),
            (
                "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF",
                "HF_TOKEN=[REDACTED]",
            ),
            ("ghp_0123456789abcdefghijklmnopqrstuvwxyz", "[REDACTED]"),
            // Words that start the same but are no keys stay.
            (
                "task-runner sk-short ask-me bearer of news",
                "task-runner sk-short ask-me bearer of news",
            ),
            ("hf_hub_download AKIA", "hf_hub_download AKIA"),
        ];
        for (input, want) in cases {
            let mut text = input.to_owned();
            let count = redact(&mut text);
            assert_eq!(text, want, "{input}");
            assert_eq!(count, usize::from(input != want), "{input}");
        }
        let mut two = "sk-aaaaaaaaaaaaaaaaaaaa and sk-bbbbbbbbbbbbbbbbbbbb".to_owned();
        assert_eq!(redact(&mut two), 2);
        assert_eq!(two, "[REDACTED] and [REDACTED]");
    }
}

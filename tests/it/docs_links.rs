//! The documents hold together: every relative link in README.md,
//! ARCHITECTURE.md, CHANGELOG.md and each `.md` file under docs/ (the
//! decisions in docs/decisions/ included) names a file that exists, and a
//! link with an `#anchor` names a heading of its target (or of its own
//! file), by GitHub's slug rules. And they stay the size a newcomer reads:
//! the README a few screens, so that what moved into docs/guides/ does not
//! creep back; ARCHITECTURE.md at most 25,000 bytes, so that the decision
//! history stays in docs/decisions/ (issue 36); and CHANGELOG.md release
//! notes, one line an entry, the detail in commit messages.
//!
//! Links are read from the Markdown source: inline links (`[text](target)`)
//! and reference definitions (`[name]: target`), outside code blocks and
//! code spans. Links with a scheme (`https:`, `mailto:`) are not followed:
//! no test may depend on the network.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The README's budget in bytes: a few screens (issue 28).
const README_MAX_BYTES: u64 = 15_000;

/// ARCHITECTURE.md's budget in bytes: the map of the code, not its
/// history (issue 36).
const ARCHITECTURE_MAX_BYTES: u64 = 25_000;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.md` file under `dir`, sorted, so that failures read the same on
/// every run.
fn markdown_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read docs folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            markdown_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
    found.sort();
}

/// The line with its code spans (`` `...` ``) blanked, so a link shown as
/// code is not taken for one. A span left open at the end of the line is
/// blanked to the end.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if in_code {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The lines of `text` outside fenced code blocks, with their 1-based
/// numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => lines.push((i + 1, line)),
            _ => {}
        }
    }
    lines
}

/// The link targets of one line of prose: inline links, whose target may
/// hold balanced parentheses and a title after a space, and a reference
/// definition when the line is one.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let trimmed = line.trim_start();
    if trimmed.starts_with('[')
        && let Some(close) = trimmed.find("]:")
        && let Some(target) = trimmed[close + 2..].split_whitespace().next()
    {
        targets.push(target.trim_matches(['<', '>']).to_owned());
    }
    let mut rest = line.as_str();
    while let Some(start) = rest.find("](") {
        let after = &rest[start + 2..];
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(['<', '>']).to_owned());
        rest = &after[end.min(after.len())..];
    }
    targets
}

/// GitHub's anchor for a heading's text: lowercase, each space a `-`,
/// every character but letters, digits, `-` and `_` dropped. Link syntax
/// in the heading counts by its text only.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](url)` reads as `text`.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").and_then(|mid| {
            after[mid + 2..]
                .find(')')
                .map(|close| (mid, mid + 2 + close + 1))
        }) {
            Some((mid, end)) => {
                text.push_str(&after[..mid]);
                rest = &after[end..];
            }
            None => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (ATX headings outside code
/// blocks); a repeated heading's later anchors get `-1`, `-2`... as on
/// GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while found.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        found.insert(anchor);
    }
    found
}

/// What is wrong with each relative link of `file`, as `FILE:LINE: link:
/// why`: a target that does not exist, or an anchor that is no heading of
/// its (Markdown) target.
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("read markdown file");
    let dir = file.parent().expect("file in a folder");
    let mut broken = Vec::new();
    for (number, line) in prose_lines(&text) {
        for link in link_targets(line) {
            if link.is_empty() || link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match link.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            let why = if !target.exists() {
                Some(format!("{path} does not exist"))
            } else {
                anchor
                    .filter(|_| target.extension().is_some_and(|e| e == "md"))
                    .filter(|anchor| {
                        let target_text =
                            std::fs::read_to_string(&target).expect("read link target");
                        !anchors(&target_text).contains(*anchor)
                    })
                    .map(|anchor| {
                        format!(
                            "no heading #{anchor} in {}",
                            if path.is_empty() { "this file" } else { path }
                        )
                    })
            };
            if let Some(why) = why {
                let shown = file.strip_prefix(repo_root()).unwrap_or(file);
                broken.push(format!("{}:{number}: {link}: {why}", shown.display()));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_in_the_documents_resolves() {
    let root = repo_root();
    let mut files = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .map(|f| root.join(f))
        .to_vec();
    markdown_files(&root.join("docs"), &mut files);
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("docs/decisions/README.md")),
        "the decisions' index is read too: {files:#?}"
    );
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_fits_on_a_few_screens() {
    let size = std::fs::metadata(repo_root().join("README.md"))
        .expect("README.md")
        .len();
    assert!(
        size <= README_MAX_BYTES,
        "README.md is {size} bytes, over {README_MAX_BYTES}: move the detail to docs/guides/"
    );
}

#[test]
fn the_architecture_fits_its_budget() {
    let size = std::fs::metadata(repo_root().join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md")
        .len();
    assert!(
        size <= ARCHITECTURE_MAX_BYTES,
        "ARCHITECTURE.md is {size} bytes, over {ARCHITECTURE_MAX_BYTES}: \
         move why a choice was made to docs/decisions/"
    );
}

/// The list items of `text` that run over more than one line, as `LINE:
/// item`: a line of prose right after an item's line that is neither a new
/// item, a heading nor blank continues the item.
fn multi_line_entries(text: &str) -> Vec<String> {
    let is_item = |line: &str| {
        let trimmed = line.trim_start();
        trimmed.starts_with("- ") || trimmed.starts_with("* ") || trimmed.starts_with("+ ")
    };
    let mut found = Vec::new();
    let mut item: Option<(usize, &str)> = None;
    let mut last = 0;
    for (number, line) in prose_lines(text) {
        // A fenced block between two lines ends the item.
        if number != last + 1 {
            item = None;
        }
        last = number;
        if is_item(line) {
            item = Some((number, line));
        } else if line.trim().is_empty() || line.starts_with('#') {
            item = None;
        } else if let Some((start, first)) = item.take() {
            found.push(format!("{start}: {first}"));
        }
    }
    found
}

#[test]
fn changelog_entries_are_one_line_each_in_their_groups() {
    let text = std::fs::read_to_string(repo_root().join("CHANGELOG.md")).expect("CHANGELOG.md");
    let long = multi_line_entries(&text);
    assert!(
        long.is_empty(),
        "CHANGELOG.md entries over more than one line (one line a change; the detail goes \
         in the commit message):\n{}",
        long.join("\n")
    );
    // Grouped as Keep a Changelog groups release notes: what was added,
    // changed, fixed... and nothing else (no development log by topic).
    let groups = [
        "Added",
        "Changed",
        "Deprecated",
        "Removed",
        "Fixed",
        "Security",
    ];
    let odd: Vec<&str> = prose_lines(&text)
        .into_iter()
        .filter_map(|(_, line)| line.strip_prefix("### "))
        .filter(|group| !groups.contains(&group.trim()))
        .collect();
    assert!(
        odd.is_empty(),
        "CHANGELOG.md groups other than {groups:?}: {odd:?}"
    );
}

#[test]
fn an_entry_over_two_lines_is_reported() {
    let text = "# Changelog\n\n## Unreleased\n\n### Added\n\n\
                - one line\n\
                - two\n  lines\n\
                * a star\n\
                \n\
                A paragraph\nof prose.\n\
                ```\n- in a block\n  goes on\n```\n\
                - three\n  lines\n  here\n";
    assert_eq!(
        multi_line_entries(text),
        ["8: - two", "18: - three"],
        "{text}"
    );
}

#[test]
fn a_broken_link_or_anchor_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("guides")).expect("mkdir");
    std::fs::write(
        dir.path().join("guides/a.md"),
        "# A guide\n\n## Images without a daemon (`--env oci`)\n\n## Grading another agent's patches\n",
    )
    .expect("write");
    let index = dir.path().join("index.md");
    std::fs::write(
        &index,
        "# Index\n\n\
         [ok](guides/a.md#images-without-a-daemon---env-oci) and [self](#index)\n\
         [ok too](guides/a.md#grading-another-agents-patches)\n\
         [gone](guides/missing.md) and `[code](not/a/link.md)`\n\
         [bad anchor](guides/a.md#grading-another-agent's-patches)\n\
         ```\n[in a block](nowhere.md)\n```\n\
         [ref]: ../elsewhere.md\n\
         [web](https://example.com/x.md)\n",
    )
    .expect("write");
    let broken = broken_links(&index);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains(":5: guides/missing.md: "), "{broken:#?}");
    assert!(
        broken[1].contains(":6: guides/a.md#grading-another-agent's-patches: no heading"),
        "{broken:#?}"
    );
    assert!(broken[2].contains(":10: ../elsewhere.md: "), "{broken:#?}");
}

#[test]
fn slugs_follow_githubs_rules() {
    for (heading, expected) in [
        (
            "Images without a daemon (`--env oci`)",
            "images-without-a-daemon---env-oci",
        ),
        (
            "Grading another agent's patches",
            "grading-another-agents-patches",
        ),
        ("`onebash compare`", "onebash-compare"),
        (
            "When the API refuses the run",
            "when-the-api-refuses-the-run",
        ),
        ("run.json", "runjson"),
        ("snake_case and A-B", "snake_case-and-a-b"),
        ("See [cli.md](cli.md) here", "see-climd-here"),
    ] {
        assert_eq!(slug(heading), expected, "{heading}");
    }
    let found = anchors("# Title\n## Usage\n```\n# not a heading\n```\n## Usage\n#nospace\n");
    let expected: BTreeSet<String> = ["title", "usage", "usage-1"].map(String::from).into();
    assert_eq!(found, expected);
}

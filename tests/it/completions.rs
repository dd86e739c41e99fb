//! `onebash completions` and `onebash man`, through the real binary: the
//! bash script is sourced by bash and its completion function, driven as
//! bash drives it, completes subcommands and flags; `man DIR` writes one
//! roff page per subcommand that `--help` lists; an unknown shell is
//! clap's usage error.

use std::path::Path;
use std::process::Command;

use crate::support::harness::{onebash, onebash_ok, path_arg};

/// What bash's completion offers for `line` (the cursor at its end), from
/// the function `complete -p onebash` names after sourcing the script.
fn bash_completes(line: &str) -> Vec<String> {
    let binary = env!("CARGO_BIN_EXE_onebash");
    // As bash calls a `complete -F` function: COMP_WORDS split at blanks
    // (a trailing blank starts an empty word), COMP_CWORD the last, and
    // the arguments the command, the word and the word before it.
    let script = r#"
        source <("$ONEBASH" completions bash) || exit 3
        spec=$(complete -p onebash) || exit 4
        function=$(printf '%s\n' "$spec" | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
        [ -n "$function" ] || { echo "no -F in: $spec" >&2; exit 5; }
        COMP_LINE=$LINE
        COMP_POINT=${#COMP_LINE}
        read -r -a COMP_WORDS <<< "$COMP_LINE"
        case "$COMP_LINE" in *' ') COMP_WORDS+=("") ;; esac
        COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
        previous=""
        [ "$COMP_CWORD" -gt 0 ] && previous=${COMP_WORDS[COMP_CWORD-1]}
        "$function" onebash "${COMP_WORDS[COMP_CWORD]}" "$previous"
        printf '%s\n' "${COMPREPLY[@]}"
    "#;
    let output = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .env("ONEBASH", binary)
        .env("LINE", line)
        .output()
        .expect("run bash");
    assert!(
        output.status.success(),
        "{line:?}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|word| word.trim().to_owned())
        .filter(|word| !word.is_empty())
        .collect()
}

/// The subcommands `onebash --help` lists, `help` aside.
fn subcommands_of_help() -> Vec<String> {
    let help = onebash_ok(&["--help"]);
    let section = help
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section");
    section
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter(|line| line.as_bytes().get(2).is_some_and(|c| *c != b' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completion_completes_subcommands_and_flags() {
    let sourced = Command::new("bash")
        .args([
            "--norc",
            "-c",
            "source <(\"$ONEBASH\" completions bash); complete -p onebash",
        ])
        .env("ONEBASH", env!("CARGO_BIN_EXE_onebash"))
        .output()
        .expect("run bash");
    let spec = String::from_utf8_lossy(&sourced.stdout);
    assert!(
        sourced.status.success(),
        "{}",
        String::from_utf8_lossy(&sourced.stderr)
    );
    assert!(
        spec.contains(" -F ") && spec.trim_end().ends_with(" onebash"),
        "{spec}"
    );

    let re = bash_completes("onebash re");
    assert!(re.contains(&"report".to_owned()), "{re:?}");
    assert!(re.contains(&"regrade".to_owned()), "{re:?}");
    assert!(!re.contains(&"run".to_owned()), "{re:?}");

    let grading = bash_completes("onebash run --gra");
    assert_eq!(grading, ["--grading"]);

    // A value of a flag: the shells clap knows.
    let shells = bash_completes("onebash completions ");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        assert!(shells.contains(&shell.to_owned()), "{shells:?}");
    }
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_one_is_a_usage_error() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = onebash_ok(&["completions", shell]);
        assert!(
            script.contains("regrade") && script.contains("grading"),
            "{shell}: {script}"
        );
    }
    let output = onebash()
        .args(["completions", "tcsh"])
        .output()
        .expect("run onebash");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("invalid value 'tcsh'"), "{stderr}");
    assert!(
        stderr.contains("bash, elvish, fish, powershell, zsh"),
        "{stderr}"
    );
}

#[test]
fn man_writes_a_roff_page_for_every_subcommand_of_help() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("share/man/man1");
    let printed = onebash_ok(&["man", path_arg(&dir)]);

    let subcommands = subcommands_of_help();
    assert!(subcommands.len() >= 12, "{subcommands:?}");
    for name in ["run", "regrade", "completions", "man"] {
        assert!(subcommands.contains(&name.to_owned()), "{subcommands:?}");
    }
    let mut expected: Vec<String> = vec!["onebash.1".to_owned()];
    expected.extend(subcommands.iter().map(|name| format!("onebash-{name}.1")));
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .expect("the man folder")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    found.sort();
    expected.sort();
    assert_eq!(found, expected);
    assert_eq!(printed.lines().count(), expected.len(), "{printed}");

    for name in &expected {
        let page = std::fs::read_to_string(dir.join(name)).expect("page");
        let title = name.trim_end_matches(".1");
        assert_eq!(
            first_macro(&page),
            format!(".TH {title} 1"),
            "{name}:\n{page}"
        );
        assert!(page.contains(".SH NAME"), "{name}");
    }
    let run = std::fs::read_to_string(dir.join("onebash-run.1")).expect("page");
    assert!(run.contains("grading"), "{run}");
}

/// The page's first request after clap_mangen's definition of the `Aq`
/// string (`.ie`/`.el`, which the page's apostrophes use): its name and
/// section.
fn first_macro(page: &str) -> String {
    let line = page
        .lines()
        .find(|line| !line.starts_with(".ie ") && !line.starts_with(".el "))
        .unwrap_or_default();
    line.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn man_names_a_folder_it_cannot_make() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("taken");
    std::fs::write(&file, "").expect("file");
    let output = onebash()
        .args(["man", path_arg(&file.join("man1"))])
        .output()
        .expect("run onebash");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("failed to create the man page folder"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}", Path::new("taken").join("man1").display())),
        "{stderr}"
    );
}

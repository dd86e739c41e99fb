//! The bash of a scripted model (`oracle`, `predictions`) that writes a
//! patch to a file byte for byte, whatever its size, and then runs a
//! script on it. It owns how a patch is cut into calls; what the script
//! does with the file (the apply chains) is the caller's.
//!
//! Linux caps one argument at 128 KiB (`MAX_ARG_STRLEN`), and every
//! environment runs a command as `bash -c COMMAND`, so a patch inlined in
//! one command cannot be larger. A small patch is one readable call: a
//! quoted heredoc into a `mktemp` file. A larger one is several calls, each
//! appending a piece to a file in the working copy's `.git/` (the one path
//! that persists between commands in every environment, the sandbox's
//! `/tmp` being private to each, and that is no part of the diff), then a
//! last call that checks the file's size and runs the script.

use base64::Engine;

/// The most bytes of patch one call carries: well under the 128 KiB cap,
/// with room for the script around it.
const PIECE: usize = 64 * 1024;

/// The commands that write `patch` to a file whose path is in `$variable`
/// and then run `script` (which removes the file when done): one command
/// when the patch is small, else one a piece and a last one. A heredoc's
/// delimiter grows from `delimiter` until no line of the patch is it.
pub(crate) fn patch_commands(
    variable: &str,
    delimiter: &str,
    patch: &str,
    script: &str,
) -> Vec<String> {
    let mut delimiter = delimiter.to_owned();
    while patch.lines().any(|line| line == delimiter) {
        delimiter.push('_');
    }
    if patch.len() <= PIECE {
        let write = heredoc(&format!("${variable}"), ">", &delimiter, patch);
        return vec![format!("{variable}=$(mktemp) && {write}\n{script}")];
    }
    let file = format!(".git/onebash-{variable}.patch");
    let mut commands = Vec::new();
    let mut redirect = ">";
    for piece in pieces(patch) {
        let command = match piece {
            Piece::Lines(lines) => heredoc(&file, redirect, &delimiter, lines),
            Piece::Encoded(encoded) => {
                format!("printf '%s' '{encoded}' | base64 -d {redirect} {file}")
            }
        };
        commands.push(command);
        redirect = ">>";
    }
    commands.push(format!(
        "{variable}={file}\n\
         if [ \"$(wc -c < \"${variable}\" 2>/dev/null | tr -d ' ')\" != {size} ]; then\n\
         \x20 echo \"onebash: the patch was not written whole to ${variable} (the calls before this one failed)\"; rm -f \"${variable}\"; exit 1\n\
         fi\n\
         {script}",
        size = patch.len()
    ));
    commands
}

/// `cat` of a quoted heredoc into `file`, byte for byte: a heredoc ends
/// its text with a newline, taken off again when the text has none.
fn heredoc(file: &str, redirect: &str, delimiter: &str, text: &str) -> String {
    let quoted = if file.starts_with('$') {
        format!("\"{file}\"")
    } else {
        file.to_owned()
    };
    let (newline, truncate) = match text.ends_with('\n') {
        true => ("", String::new()),
        false => ("\n", format!(" && truncate -s -1 {quoted}")),
    };
    format!("cat {redirect} {quoted} <<'{delimiter}'{truncate}\n{text}{newline}{delimiter}")
}

/// What one call of a large patch carries.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    /// Whole lines, at most [`PIECE`] bytes.
    Lines(&'a str),
    /// Base64 of part of a line longer than [`PIECE`].
    Encoded(String),
}

/// The patch cut on line boundaries into pieces of at most [`PIECE`]
/// bytes; a longer line is cut anywhere and sent in base64.
fn pieces(patch: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut end = 0;
    for line in patch.split_inclusive('\n') {
        if line.len() > PIECE {
            if end > start {
                pieces.push(Piece::Lines(&patch[start..end]));
            }
            // Three bytes make four base64 characters.
            for part in line.as_bytes().chunks(PIECE / 4 * 3) {
                let encoded = base64::engine::general_purpose::STANDARD.encode(part);
                pieces.push(Piece::Encoded(encoded));
            }
            end += line.len();
            start = end;
            continue;
        }
        if end + line.len() - start > PIECE {
            pieces.push(Piece::Lines(&patch[start..end]));
            start = end;
        }
        end += line.len();
    }
    if end > start {
        pieces.push(Piece::Lines(&patch[start..end]));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the commands in order in a git repo, as separate `bash -c`
    /// calls; returns the bytes the script read and the last output.
    fn run_all(patch: &str) -> (Vec<u8>, String, usize) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path();
        let init = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(repo)
            .status()
            .expect("git");
        assert!(init.success());
        let commands = patch_commands(
            "p",
            "ONEBASH_P",
            patch,
            "cat \"$p\" > read.out; rm -f \"$p\"; echo done",
        );
        let mut last = String::new();
        for command in &commands {
            // Linux's cap on one argument.
            assert!(command.len() < 128 * 1024, "{}", command.len());
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(command)
                .current_dir(repo)
                .output()
                .expect("bash");
            last = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{last}");
        }
        let read = std::fs::read(repo.join("read.out"));
        let leftovers: Vec<_> = std::fs::read_dir(repo.join(".git"))
            .expect("git dir")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("onebash-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        (read.expect("read"), last, commands.len())
    }

    #[test]
    fn a_small_patch_is_one_call_and_written_byte_for_byte() {
        for patch in ["a\nONEBASH_P\nb\n", "no final newline", "x\r\ny\r\n"] {
            let (read, last, calls) = run_all(patch);
            assert_eq!(calls, 1);
            assert_eq!(String::from_utf8_lossy(&read), patch);
            assert_eq!(last, "done\n");
        }
        let command = &patch_commands("p", "D", "D\n", "s")[0];
        assert_eq!(command, "p=$(mktemp) && cat > \"$p\" <<'D_'\nD\nD_\ns");
    }

    /// Over the cap on one argument: many lines, one line longer than a
    /// piece, and no final newline.
    #[test]
    fn a_patch_over_the_argument_cap_goes_in_pieces_byte_for_byte() {
        let mut patch = String::new();
        for i in 0..5000 {
            patch.push_str(&format!("+line {i} of the patch, with some text\n"));
        }
        patch.push_str(&format!("+{}\n", "é".repeat(60_000)));
        patch.push_str("ONEBASH_P\n+the end, no newline");
        assert!(patch.len() > 300 * 1024, "{}", patch.len());
        let (read, last, calls) = run_all(&patch);
        assert!(calls > 4, "{calls}");
        assert_eq!(read.len(), patch.len());
        assert!(read == patch.as_bytes());
        assert_eq!(last, "done\n");
    }

    #[test]
    fn pieces_keep_lines_whole_and_encode_a_long_one() {
        let line = "x".repeat(PIECE - 1) + "\n";
        let long = "y".repeat(PIECE + 10) + "\n";
        let patch = format!("{line}{line}{long}{line}");
        let found = pieces(&patch);
        assert_eq!(found.len(), 5, "{}", found.len());
        assert_eq!(found[0], Piece::Lines(&line));
        assert_eq!(found[1], Piece::Lines(&line));
        assert!(matches!(&found[2], Piece::Encoded(e) if e.len() <= PIECE));
        assert!(matches!(&found[3], Piece::Encoded(_)));
        assert_eq!(found[4], Piece::Lines(&line));
    }

    /// A call before the last that failed leaves a short file: the last
    /// call says so and runs nothing.
    #[test]
    fn a_short_file_is_refused() {
        let patch = "x\n".repeat(PIECE);
        let commands = patch_commands("p", "D", &patch, "echo ran");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join(".git")).expect("mkdir");
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(commands.last().expect("last"))
            .current_dir(dir.path())
            .output()
            .expect("bash");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(text.contains("not written whole"), "{text}");
        assert!(!text.contains("ran"), "{text}");
    }
}

//! `onebash man DIR`: a roff man page per subcommand (`onebash.1`,
//! `onebash-run.1`, ...), rendered by clap_mangen from the clap types of
//! `crate::cli`, so a page cannot say other than `--help`. It writes the
//! pages; installing them (MANPATH, man1/) is the user's.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;

/// Why the pages could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ManError {
    #[error("failed to create the man page folder {}: {source}", .path.display())]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to write the man page {}: {source}", .path.display())]
    Page {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes the page of `onebash` and of each of its subcommands into
/// `dir`, made when missing; the paths written, the top page first.
pub(crate) fn write_pages(dir: &Path) -> Result<Vec<PathBuf>, ManError> {
    std::fs::create_dir_all(dir).map_err(|source| ManError::Folder {
        path: dir.to_owned(),
        source,
    })?;
    // Built once, so each subcommand carries its display name
    // (`onebash-run`), which names its page and its title; `help` is
    // clap's, not a subcommand of ours, and gets no page.
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let mut written = Vec::new();
    write_tree(&command, dir, &mut written)?;
    Ok(written)
}

/// The page of `command`, then those of its visible subcommands.
fn write_tree(
    command: &clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), ManError> {
    // Every page's source is onebash and its version: a subcommand has no
    // version of its own, and clap_mangen would name it alone.
    let man = clap_mangen::Man::new(command.clone())
        .source(concat!("onebash ", env!("CARGO_PKG_VERSION")))
        .manual("onebash manual");
    let path = dir.join(man.get_filename());
    man.generate_to(dir).map_err(|source| ManError::Page {
        path: path.clone(),
        source,
    })?;
    written.push(path);
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        write_tree(sub, dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top page first, then one per subcommand, named after it.
    #[test]
    fn one_page_per_subcommand_named_after_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("man1");
        let written = write_pages(&dir).expect("pages");
        let mut expected = vec!["onebash.1".to_owned()];
        expected.extend(
            Cli::command()
                .get_subcommands()
                .map(|sub| format!("onebash-{}.1", sub.get_name())),
        );
        let names: Vec<String> = written
            .iter()
            .map(|path| {
                path.file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, expected);
    }
}

//! `onebash completions SHELL`: the shell's completion script, generated
//! by clap_complete from the clap types of `crate::cli`, so it names every
//! subcommand and flag the parser knows. Which shells there are is
//! clap_complete's `Shell`; the script is printed, never installed.

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// The completion script of `shell` for the `onebash` command.
pub(crate) fn script(shell: Shell) -> String {
    let mut command = Cli::command();
    let mut bytes = Vec::new();
    clap_complete::generate(shell, &mut command, "onebash", &mut bytes);
    // The script is made of the help texts of `crate::cli`, which are
    // UTF-8 Rust strings; lossy only guards against clap_complete itself.
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// Each shell's script names the command and a subcommand of it.
    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in Shell::value_variants() {
            let text = script(*shell);
            assert!(text.contains("onebash"), "{shell}: {text}");
            assert!(text.contains("regrade"), "{shell}: {text}");
        }
    }
}

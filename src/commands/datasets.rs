//! `onebash datasets`: the names onebash knows datasets by (each a Hub id
//! and a split, `task::datasets`), what each is, and where datasets are
//! cached. A name goes wherever a task file does: `onebash run NAME`.

use std::fmt::Write as _;

use crate::cli::DatasetsArgs;
use crate::task::TaskFileError;

/// The table to print: with `--registry`, the registry's datasets (its
/// benchmark's own registry when given no value).
pub(crate) fn list(args: &DatasetsArgs) -> Result<String, TaskFileError> {
    if let Some(location) = &args.registry
        && let Some(listing) =
            crate::task::registry_datasets((!location.is_empty()).then_some(location.as_str()))
    {
        return listing;
    }
    Ok(hub_names(args))
}

/// The short names of Hub datasets, and where they are cached.
fn hub_names(args: &DatasetsArgs) -> String {
    let cache_dir = args
        .cache_dir
        .clone()
        .unwrap_or_else(crate::config::default_cache_dir);
    let aliases = crate::task::datasets();
    let width = aliases.iter().map(|a| a.name.len()).max().unwrap_or(0);
    let hub_width = aliases
        .iter()
        .map(|a| a.repo.len() + a.split.len() + 4)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for alias in &aliases {
        let hub = format!("hf:{}:{}", alias.repo, alias.split);
        let _ = writeln!(
            out,
            "{:width$}  {:hub_width$}  {}",
            alias.name, hub, alias.about
        );
    }
    let _ = writeln!(
        out,
        "\nAny other dataset: hf:OWNER/NAME[@REVISION][:SPLIT]. Cached in {} (HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE as the Hub's own client reads them).",
        cache_dir.join("datasets").display()
    );
    let _ = writeln!(
        out,
        "A task registry's datasets: onebash datasets --registry [FILE|URL]."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name is listed with the Hub id and split it reads, and the
    /// cache folder named is the one `--cache-dir` gives.
    #[test]
    fn every_name_is_listed_with_its_hub_id_and_split() {
        let text = hub_names(&DatasetsArgs {
            cache_dir: Some("/tmp/c".into()),
            registry: None,
        });
        let aliases = crate::task::datasets();
        assert_eq!(aliases.len(), 8);
        for alias in aliases {
            let line = text
                .lines()
                .find(|line| line.starts_with(&format!("{} ", alias.name)))
                .unwrap_or_else(|| panic!("{} is not listed:\n{text}", alias.name));
            assert!(
                line.contains(&format!("hf:{}:{}", alias.repo, alias.split)),
                "{line}"
            );
        }
        assert!(text.contains("Cached in /tmp/c/datasets"), "{text}");
    }
}

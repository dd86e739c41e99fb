//! `onebash datasets`: the names onebash knows datasets by (each a Hub id
//! and a split, `dataset::ALIASES`), what each is, and where datasets are
//! cached. A name goes wherever a task file does: `onebash run NAME`.

use std::fmt::Write as _;

use crate::cli::DatasetsArgs;
use crate::dataset::ALIASES;

/// The table to print.
pub(crate) fn list(args: &DatasetsArgs) -> String {
    let cache_dir = args
        .cache_dir
        .clone()
        .unwrap_or_else(crate::config::default_cache_dir);
    let width = ALIASES.iter().map(|a| a.name.len()).max().unwrap_or(0);
    let hub_width = ALIASES
        .iter()
        .map(|a| a.repo.len() + a.split.len() + 4)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for alias in ALIASES {
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
    out
}

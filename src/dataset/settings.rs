//! Where the Hub is and who asks it ([`HubSettings`]): the endpoint, the
//! token and offline mode, read from the environment as huggingface_hub
//! reads them, so a machine set up for `datasets` works for onebash.
//!
//! Owns reading those variables and the token file; it makes no request.
//! The caller takes `HF_TOKEN` out of the environment itself (so the
//! agent's commands never see it) and hands it over.

use std::ffi::OsString;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

/// The Hub when `HF_ENDPOINT` is not set.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// How onebash reaches the Hub and where it keeps what it fetched.
#[derive(Clone)]
pub(crate) struct HubSettings {
    /// The Hub's base URL, no trailing `/`.
    pub(crate) endpoint: String,
    /// Sent as `Authorization: Bearer`; never printed.
    pub(crate) token: Option<String>,
    /// `HF_HUB_OFFLINE`: no request at all, the cache only.
    pub(crate) offline: bool,
    /// onebash's `--cache-dir`; datasets go under its `datasets/`.
    pub(crate) cache_dir: PathBuf,
    /// Draw download bars on stderr (it is a terminal).
    pub(crate) progress: bool,
    /// The file the token was read from, when it came from one: the
    /// caller hides it from the agent's sandbox.
    pub(crate) token_file: Option<PathBuf>,
}

impl std::fmt::Debug for HubSettings {
    /// Says whether there is a token, never what it is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubSettings")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("offline", &self.offline)
            .field("cache_dir", &self.cache_dir)
            .field("progress", &self.progress)
            .field("token_file", &self.token_file)
            .finish()
    }
}

impl HubSettings {
    /// The settings of this process: `HF_ENDPOINT`, `HF_HUB_OFFLINE`, the
    /// token given (the caller's `HF_TOKEN`) or else the one in
    /// `$HF_TOKEN_PATH` or `$HF_HOME/token` (`HF_HOME` defaults to
    /// `$XDG_CACHE_HOME/huggingface`, then `~/.cache/huggingface`).
    pub(crate) fn from_env(token: Option<String>, cache_dir: &Path) -> HubSettings {
        let mut settings =
            HubSettings::from_lookup(token, cache_dir, |name| std::env::var_os(name));
        settings.progress = std::io::stderr().is_terminal();
        settings
    }

    /// [`HubSettings::from_env`] with the variables read through `var`
    /// (tests give their own) and no progress bars.
    pub(crate) fn from_lookup(
        token: Option<String>,
        cache_dir: &Path,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> HubSettings {
        let text = |name: &str| var(name).map(|v| v.to_string_lossy().into_owned());
        let endpoint = text("HF_ENDPOINT")
            .map(|e| e.trim().trim_end_matches('/').to_owned())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let offline = text("HF_HUB_OFFLINE").is_some_and(|v| is_true(&v));
        let (token, token_file) = match token.and_then(non_empty) {
            Some(token) => (Some(token), None),
            None => match token_path(&var) {
                Some(path) => match std::fs::read_to_string(&path).ok().and_then(non_empty) {
                    Some(token) => (Some(token), Some(path)),
                    None => (None, None),
                },
                None => (None, None),
            },
        };
        HubSettings {
            endpoint,
            token,
            offline,
            cache_dir: cache_dir.to_owned(),
            progress: false,
            token_file,
        }
    }
}

/// huggingface_hub's `_is_true`: `1`, `ON`, `YES` or `TRUE`, any case.
fn is_true(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_uppercase().as_str(),
        "1" | "ON" | "YES" | "TRUE"
    )
}

fn non_empty(token: String) -> Option<String> {
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

/// Where huggingface_hub's `hf auth login` keeps the token.
fn token_path(var: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = set("HF_TOKEN_PATH") {
        return Some(path);
    }
    let home = set("HF_HOME").or_else(|| {
        set("XDG_CACHE_HOME")
            .or_else(|| set("HOME").map(|home| home.join(".cache")))
            .map(|cache| cache.join("huggingface"))
    })?;
    Some(home.join("token"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(token: Option<&str>, vars: &[(&str, &Path)]) -> HubSettings {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_os_str().to_owned()))
            .collect();
        HubSettings::from_lookup(token.map(str::to_owned), Path::new("/cache"), |name| {
            vars.get(name).cloned()
        })
    }

    #[test]
    fn the_endpoint_and_offline_mode_are_read_as_huggingface_hub_reads_them() {
        let plain = settings(None, &[]);
        assert_eq!(plain.endpoint, "https://huggingface.co");
        assert!(!plain.offline);
        assert_eq!(plain.cache_dir, Path::new("/cache"));
        let mirror = settings(
            None,
            &[("HF_ENDPOINT", Path::new("http://127.0.0.1:9/hub/"))],
        );
        assert_eq!(mirror.endpoint, "http://127.0.0.1:9/hub");
        for (value, offline) in [
            ("1", true),
            ("True", true),
            ("yes", true),
            ("ON", true),
            ("0", false),
            ("no", false),
            ("", false),
        ] {
            let got = settings(None, &[("HF_HUB_OFFLINE", Path::new(value))]).offline;
            assert_eq!(got, offline, "HF_HUB_OFFLINE={value}");
        }
    }

    #[test]
    fn a_token_given_wins_over_the_environment() {
        let settings = HubSettings::from_env(Some("hf_given".into()), Path::new("/c"));
        assert_eq!(settings.token.as_deref(), Some("hf_given"));
        assert_eq!(settings.token_file, None);
        assert_eq!(settings.cache_dir, Path::new("/c"));
    }

    #[test]
    fn the_token_is_the_one_given_else_the_token_file_trimmed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("hf");
        std::fs::create_dir_all(&home).expect("mkdir");
        std::fs::write(home.join("token"), "  hf_file\n").expect("write");
        let given = settings(Some(" hf_given "), &[("HF_HOME", &home)]);
        assert_eq!(given.token.as_deref(), Some("hf_given"));
        assert_eq!(given.token_file, None);

        let from_file = settings(Some(""), &[("HF_HOME", &home)]);
        assert_eq!(from_file.token.as_deref(), Some("hf_file"));
        assert_eq!(from_file.token_file, Some(home.join("token")));

        let xdg = dir.path().join("xdg");
        std::fs::create_dir_all(xdg.join("huggingface")).expect("mkdir");
        std::fs::write(xdg.join("huggingface/token"), "hf_xdg").expect("write");
        assert_eq!(
            settings(None, &[("XDG_CACHE_HOME", &xdg)]).token.as_deref(),
            Some("hf_xdg")
        );
        let user = dir.path().join("user");
        std::fs::create_dir_all(user.join(".cache/huggingface")).expect("mkdir");
        std::fs::write(user.join(".cache/huggingface/token"), "hf_home").expect("write");
        assert_eq!(
            settings(None, &[("HOME", &user)]).token.as_deref(),
            Some("hf_home")
        );

        let path = dir.path().join("elsewhere");
        std::fs::write(&path, "hf_path").expect("write");
        let by_path = settings(None, &[("HF_TOKEN_PATH", &path), ("HF_HOME", &home)]);
        assert_eq!(by_path.token.as_deref(), Some("hf_path"));
        assert_eq!(by_path.token_file, Some(path));

        std::fs::write(home.join("token"), "\n").expect("write");
        let empty = settings(None, &[("HF_HOME", &home)]);
        assert_eq!((empty.token, empty.token_file), (None, None));
        let missing = settings(None, &[("HF_HOME", &dir.path().join("none"))]);
        assert_eq!(missing.token, None);
        assert!(!format!("{given:?}").contains("hf_given"));
    }
}

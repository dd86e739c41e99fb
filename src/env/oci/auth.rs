//! What a registry asks of a client before it answers, and what the user
//! has to give it: the `WWW-Authenticate` challenge of a 401 and the
//! credentials of the user's docker or podman config.
//!
//! Owns reading `auths.<host>.auth` (base64 `user:password`) from
//! `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, then
//! podman's `$REGISTRY_AUTH_FILE` or `$XDG_RUNTIME_DIR/containers/auth.json`;
//! the first file that names the host wins. Credential helpers
//! (`credsStore`, `credHelpers`) are not run: onebash starts no program
//! to get a secret. A credential is never printed: [`Credentials`]'s
//! `Debug` hides it and messages name the file it came from, not its
//! content. `registry.rs` does the HTTP.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::OciError;
use super::error::CredentialsProblem;

/// A user and password for one registry, and the file they came from.
#[derive(Clone)]
pub(super) struct Credentials {
    pub user: String,
    pub password: String,
    pub file: PathBuf,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials(<hidden>, from {})", self.file.display())
    }
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: HashMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
}

/// The files credentials are read from, in order, given the environment.
pub(super) fn config_files(var: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    match (set("DOCKER_CONFIG"), set("HOME")) {
        (Some(dir), _) => files.push(Path::new(&dir).join("config.json")),
        (None, Some(home)) => files.push(Path::new(&home).join(".docker/config.json")),
        (None, None) => {}
    }
    if let Some(file) = set("REGISTRY_AUTH_FILE") {
        files.push(PathBuf::from(file));
    }
    if let Some(dir) = set("XDG_RUNTIME_DIR") {
        files.push(Path::new(&dir).join("containers/auth.json"));
    }
    files
}

/// The names a config may give `host` under `auths`: Docker Hub has
/// several, and keys may carry a scheme or a path.
fn key_matches(key: &str, host: &str) -> bool {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let key_host = key.split('/').next().unwrap_or(key);
    let hub = ["docker.io", "index.docker.io", "registry-1.docker.io"];
    key_host == host || (hub.contains(&host) && hub.contains(&key_host))
}

/// The credentials for `host` in the first of `files` that has them.
/// A file that is missing is skipped; one that is not JSON is an error
/// (naming the file only).
pub(super) fn credentials(files: &[PathBuf], host: &str) -> Result<Option<Credentials>, OciError> {
    for file in files {
        let Ok(bytes) = std::fs::read(file) else {
            continue;
        };
        let bad = |problem: CredentialsProblem| OciError::Credentials {
            file: file.clone(),
            problem,
        };
        let config: ConfigFile =
            serde_json::from_slice(&bytes).map_err(|_| bad(CredentialsProblem::NotJson))?;
        let Some(encoded) = config
            .auths
            .iter()
            .find(|(key, _)| key_matches(key, host))
            .and_then(|(_, entry)| entry.auth.as_deref())
        else {
            continue;
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| {
                bad(CredentialsProblem::NotBase64 {
                    host: host.to_owned(),
                })
            })?;
        let text = String::from_utf8(decoded).map_err(|_| {
            bad(CredentialsProblem::NotUtf8 {
                host: host.to_owned(),
            })
        })?;
        let (user, password) = text.split_once(':').ok_or_else(|| {
            bad(CredentialsProblem::NotUserPassword {
                host: host.to_owned(),
            })
        })?;
        return Ok(Some(Credentials {
            user: user.to_owned(),
            password: password.to_owned(),
            file: file.clone(),
        }));
    }
    Ok(None)
}

/// A `WWW-Authenticate` challenge: its scheme (lowercased) and parameters.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Challenge {
    pub scheme: String,
    pub params: HashMap<String, String>,
}

/// Parses `Bearer realm="...",service="...",scope="..."` (values quoted
/// or not; a quoted value may hold commas, as scopes do).
pub(super) fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, mut rest) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.is_empty() {
        return None;
    }
    let mut params = HashMap::new();
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        let Some((name, after)) = rest.split_once('=') else {
            break;
        };
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"')?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        params.insert(name.trim().to_ascii_lowercase(), value.to_owned());
        rest = after;
    }
    Some(Challenge {
        scheme: scheme.to_ascii_lowercase(),
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_is_read_with_its_commas() {
        let challenge = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull,push""#,
        )
        .expect("challenge");
        assert_eq!(challenge.scheme, "bearer");
        assert_eq!(challenge.params["realm"], "https://auth.docker.io/token");
        assert_eq!(challenge.params["service"], "registry.docker.io");
        assert_eq!(challenge.params["scope"], "repository:a/b:pull,push");
        let basic = parse_challenge(r#"Basic realm=Registry"#).expect("challenge");
        assert_eq!(basic.scheme, "basic");
        assert_eq!(basic.params["realm"], "Registry");
    }

    #[test]
    fn credentials_come_from_the_first_file_naming_the_host() {
        let dir = tempfile::tempdir().expect("tempdir");
        let docker = dir.path().join("config.json");
        let encoded = base64::engine::general_purpose::STANDARD.encode("ann:s3cret:x");
        std::fs::write(
            &docker,
            format!(
                r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{encoded}"}},"other.io":{{}}}}}}"#
            ),
        )
        .expect("write");
        let podman = dir.path().join("auth.json");
        let encoded = base64::engine::general_purpose::STANDARD.encode("bob:pw");
        std::fs::write(
            &podman,
            format!(r#"{{"auths":{{"127.0.0.1:5000":{{"auth":"{encoded}"}}}}}}"#),
        )
        .expect("write");
        let files = [dir.path().join("missing.json"), docker.clone(), podman];
        let hub = credentials(&files, "docker.io")
            .expect("read")
            .expect("found");
        assert_eq!(
            (hub.user.as_str(), hub.password.as_str()),
            ("ann", "s3cret:x")
        );
        assert!(!format!("{hub:?}").contains("s3cret"));
        let local = credentials(&files, "127.0.0.1:5000")
            .expect("read")
            .expect("found");
        assert_eq!(local.user, "bob");
        assert!(credentials(&files, "ghcr.io").expect("read").is_none());
        std::fs::write(&docker, "not json s3cret").expect("write");
        let err = credentials(&files, "docker.io")
            .expect_err("bad file")
            .to_string();
        assert!(
            err.contains("config.json") && !err.contains("s3cret"),
            "{err}"
        );
    }

    #[test]
    fn the_config_files_follow_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            config_files(env(&[("HOME", "/h"), ("XDG_RUNTIME_DIR", "/run/u")])),
            [
                PathBuf::from("/h/.docker/config.json"),
                PathBuf::from("/run/u/containers/auth.json")
            ]
        );
        assert_eq!(
            config_files(env(&[("HOME", "/h"), ("DOCKER_CONFIG", "/d")])),
            [PathBuf::from("/d/config.json")]
        );
    }
}

//! A registry image reference (`docker://REF`, or a bare `REF`) as docker
//! and podman spell them: `[HOST[:PORT]/]REPOSITORY[:TAG][@sha256:DIGEST]`.
//!
//! Owns the parsing and the normalisation the docker CLI applies: a first
//! component with a `.` or a `:`, or `localhost`, is the registry's host;
//! otherwise the host is Docker Hub (`docker.io`), where a one-component
//! name is under `library/`; no tag and no digest mean `latest`. Every
//! part is checked against the distribution spec's grammar, which also
//! makes each safe as a path component of the cache (`refs.rs` of the
//! registry's tags is keyed by them): no `..`, no leading `.`, no `/` in a
//! tag. It knows nothing of HTTP; `registry.rs` talks to the host.

use super::OciError;
use super::digest::Digest;
use super::error::ReferenceProblem;

/// Docker Hub as references name it, and where its API is.
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// One image in a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reference {
    /// The registry as the user named it (`docker.io` for Docker Hub).
    pub host: String,
    /// `library/debian`, `swebench/sweb.eval.x86_64.django_1776_django-11099`.
    pub repository: String,
    /// `None` only when a digest pins the image.
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

fn bad(reference: &str, problem: ReferenceProblem) -> OciError {
    OciError::BadReference {
        reference: reference.to_owned(),
        problem,
    }
}

/// A repository path component: `[a-z0-9]+([._-][a-z0-9]+)*` loosely (the
/// separators may repeat, as registries accept `__`).
fn path_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_lowercase() | bytes[0].is_ascii_digit()
        && bytes[bytes.len() - 1].is_ascii_lowercase() | bytes[bytes.len() - 1].is_ascii_digit()
        && bytes.iter().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn tag_ok(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    (1..=128).contains(&bytes.len())
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A host name or address and an optional port: letters, digits, `.`,
/// `-`, and `[...]` for IPv6; never starting with `.`.
fn host_ok(host: &str) -> bool {
    let (name_ok, port) = if let Some(rest) = host.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return false;
        };
        let ok = !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
        match after.strip_prefix(':') {
            Some(port) => (ok, Some(port)),
            None => (ok && after.is_empty(), None),
        }
    } else {
        let (name, port) = match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        };
        let ok = !name.is_empty()
            && !name.starts_with(['.', '-'])
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'));
        (ok, port)
    };
    name_ok
        && port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

impl Reference {
    /// Parses `docker://REF` or a bare `REF`.
    pub(super) fn parse(text: &str) -> Result<Reference, OciError> {
        let reference = text.strip_prefix("docker://").unwrap_or(text);
        let (name, digest) = match reference.split_once('@') {
            Some((name, digest)) => (
                name,
                Some(
                    Digest::parse(digest)
                        .map_err(|err| bad(text, ReferenceProblem::Digest(Box::new(err))))?,
                ),
            ),
            None => (reference, None),
        };
        let (host, rest) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_owned(), rest)
            }
            _ => (DOCKER_HUB.to_owned(), name),
        };
        let host = if host == "index.docker.io" {
            DOCKER_HUB.to_owned()
        } else {
            host
        };
        if !host_ok(&host) {
            return Err(bad(text, ReferenceProblem::Host { host }));
        }
        // The tag follows the last `:` of the last path component.
        let (repository, tag) = match rest.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_owned())),
            _ => (rest, None),
        };
        let repository = if host == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository.to_owned()
        };
        if !repository.split('/').all(path_component) {
            return Err(bad(text, ReferenceProblem::Repository));
        }
        if let Some(tag) = &tag
            && !tag_ok(tag)
        {
            return Err(bad(text, ReferenceProblem::Tag { tag: tag.clone() }));
        }
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_owned()),
            (tag, _) => tag,
        };
        Ok(Reference {
            host,
            repository,
            tag,
            digest,
        })
    }

    /// Where the registry's API answers.
    pub(super) fn api_host(&self) -> &str {
        if self.host == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.host
        }
    }

    /// Whether the registry is on this machine: the only case where plain
    /// HTTP is used (nothing on the way can read or change the bytes).
    pub(super) fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
    }
}

/// `127.0.0.1`, `localhost`, `[::1]` (any port), and `127.x.y.z`.
pub(super) fn is_loopback_host(host_port: &str) -> bool {
    let host = match host_port.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => host_port,
    };
    host == "localhost"
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.host, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_normalised_as_docker_does() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let cases: Vec<(String, &str, &str, Option<&str>, bool)> = vec![
            (
                "debian".into(),
                "docker.io",
                "library/debian",
                Some("latest"),
                false,
            ),
            (
                "docker://debian:bookworm".into(),
                "docker.io",
                "library/debian",
                Some("bookworm"),
                false,
            ),
            (
                "swebench/sweb.eval.x86_64.django_1776_django-11099:latest".into(),
                "docker.io",
                "swebench/sweb.eval.x86_64.django_1776_django-11099",
                Some("latest"),
                false,
            ),
            (
                "ghcr.io/owner/img:v1".into(),
                "ghcr.io",
                "owner/img",
                Some("v1"),
                false,
            ),
            (
                "127.0.0.1:5000/onebash-test/base:bookworm".into(),
                "127.0.0.1:5000",
                "onebash-test/base",
                Some("bookworm"),
                false,
            ),
            (
                "localhost/x".into(),
                "localhost",
                "x",
                Some("latest"),
                false,
            ),
            (
                format!("index.docker.io/library/debian@{digest}"),
                "docker.io",
                "library/debian",
                None,
                true,
            ),
            (
                format!("localhost:5000/a/b:t@{digest}"),
                "localhost:5000",
                "a/b",
                Some("t"),
                true,
            ),
        ];
        for (text, host, repository, tag, pinned) in cases {
            let r = Reference::parse(&text).unwrap_or_else(|err| panic!("{text}: {err}"));
            assert_eq!(r.host, host, "{text}");
            assert_eq!(r.repository, repository, "{text}");
            assert_eq!(r.tag.as_deref(), tag, "{text}");
            assert_eq!(r.digest.is_some(), pinned, "{text}");
        }
        assert_eq!(
            Reference::parse("debian").expect("parse").api_host(),
            "registry-1.docker.io"
        );
    }

    #[test]
    fn what_is_not_a_reference_is_refused_with_the_forms() {
        for text in [
            "/abs/image.tar",
            "./image.tar",
            "Debian:12",
            "host.io/../etc:x",
            "host.io/a/.hidden",
            "a:b/c",
            "debian:bad/tag",
            "debian@sha256:abc",
            "ex ample.com/a",
            "",
        ] {
            let err = Reference::parse(text).expect_err(text).to_string();
            assert!(err.contains("docker-archive:PATH"), "{text}: {err}");
        }
    }

    #[test]
    fn only_loopback_hosts_are_loopback() {
        for host in [
            "127.0.0.1:5000",
            "localhost",
            "localhost:80",
            "[::1]:5000",
            "127.1.2.3",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "docker.io",
            "10.0.0.1:5000",
            "localhost.evil.com",
            "128.0.0.1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}

//! The audit of what an allowlist's proxy refused: a refused request to
//! the task's own repository host (the agent reaching for the upstream
//! project, where the fix may be) is flagged by name. The counts
//! themselves come from the proxy (`env/egress`).

use crate::task::HostAsked;

/// The refused hosts of `asked` that are the repository's host or a
/// name under it (`api.github.com` for `github.com`).
pub(crate) fn refused_repo_hosts(repo_location: &str, asked: &[HostAsked]) -> Vec<String> {
    let Some(repo_host) = host_of(repo_location) else {
        return Vec::new();
    };
    asked
        .iter()
        .filter(|asked| asked.refused > 0)
        .filter(|asked| {
            let host = asked.host.trim_end_matches('.').to_ascii_lowercase();
            host == repo_host
                || host
                    .strip_suffix(&repo_host)
                    .is_some_and(|head| head.ends_with('.'))
        })
        .map(|asked| asked.host.clone())
        .collect()
}

/// The host of a repository's URL (`https://host/...`, `ssh://user@host:22/...`,
/// `git@host:owner/name`); none for a local path.
fn host_of(location: &str) -> Option<String> {
    let rest = match location.split_once("://") {
        Some((_, rest)) => rest,
        None if !location.starts_with('/') && location.contains(':') => location,
        None => return None,
    };
    let authority = rest.split(['/', '?']).next()?;
    let authority = authority.rsplit('@').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(host: &str, refused: u64) -> HostAsked {
        HostAsked {
            host: host.to_owned(),
            requests: refused.max(1),
            refused,
        }
    }

    #[test]
    fn a_refused_request_to_the_repos_host_is_flagged() {
        let all = [
            asked("github.com", 2),
            asked("api.github.com", 1),
            asked("pypi.org", 3),
            asked("codeload.github.com", 0),
            asked("evilgithub.com", 1),
        ];
        assert_eq!(
            refused_repo_hosts("https://github.com/django/django", &all),
            vec!["github.com".to_owned(), "api.github.com".to_owned()]
        );
        assert_eq!(
            refused_repo_hosts("git@GitHub.com:django/django.git", &all),
            vec!["github.com".to_owned(), "api.github.com".to_owned()]
        );
        assert!(refused_repo_hosts("/srv/repos/django", &all).is_empty());
        assert!(refused_repo_hosts("https://gitlab.com/a/b", &all).is_empty());
    }
}

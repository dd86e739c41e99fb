//! The allowlist of hosts a task may reach (`--allow-hosts`, a Harbor
//! task's `allowed_hosts`): its entries, read and checked with Harbor
//! 0.26's rules (`harbor/models/task/config.py`: exact hostnames,
//! leading `*.` wildcards, IP literals and CIDR ranges; no URLs, ports or
//! paths; lowercased, a trailing dot dropped), and the question the
//! proxy asks of each request: is this name, or this address, allowed;
//! and what a task's requests asked for ([`HostAsked`], recorded in its
//! trajectory). It does not resolve names nor carry requests (the proxy
//! of `env/egress` does).

use std::net::IpAddr;

/// One entry of an allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// `pypi.org`: that name only.
    Name(String),
    /// `*.pythonhosted.org`: every name under it, not the name itself
    /// (Harbor's sidecar matches the same way).
    Under(String),
    /// `10.0.0.0/8`, or an IP literal as a range of one address.
    Range { net: IpAddr, prefix: u8 },
}

/// The hosts each phase of a task may reach: the agent's commands, and
/// the verifier's (a Harbor task may give each its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PhaseHosts {
    pub agent: AllowedHosts,
    pub verifier: AllowedHosts,
}

impl PhaseHosts {
    /// The same hosts for both phases (`--allow-hosts`).
    pub(crate) fn both(hosts: AllowedHosts) -> PhaseHosts {
        PhaseHosts {
            agent: hosts.clone(),
            verifier: hosts,
        }
    }
}

/// What a task's requests asked for of one host, through the proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct HostAsked {
    /// As the request named it: a name or an address.
    pub host: String,
    /// Requests for it.
    pub requests: u64,
    /// Of which refused by the allowlist (they never left onebash).
    pub refused: u64,
}

/// Hosts a task may reach, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    entries: Vec<Entry>,
}

/// Why an entry is not one: Harbor's message for the same entry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum HostsError {
    #[error("an allowed host is empty")]
    Empty,
    #[error(
        "allowed host `{0}` is not a hostname, IP address or CIDR range (no URLs, ports or paths)"
    )]
    NotAHost(String),
    #[error("allowed host `{0}`: a wildcard is a leading `*.` before a hostname")]
    Wildcard(String),
}

impl AllowedHosts {
    /// Reads entries as Harbor reads `allowed_hosts`.
    pub(crate) fn parse<S: AsRef<str>>(items: &[S]) -> Result<AllowedHosts, HostsError> {
        let entries = items
            .iter()
            .map(|item| entry(item.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(AllowedHosts { entries })
    }

    /// Reads `--allow-hosts`: entries separated by commas.
    pub(crate) fn parse_list(list: &str) -> Result<AllowedHosts, HostsError> {
        let items: Vec<&str> = list.split(',').filter(|s| !s.trim().is_empty()).collect();
        AllowedHosts::parse(&items)
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether `name` (a hostname, not an address) is allowed by name.
    pub(crate) fn allows_name(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.entries.iter().any(|entry| match entry {
            Entry::Name(allowed) => *allowed == name,
            Entry::Under(suffix) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            Entry::Range { .. } => false,
        })
    }

    /// Whether the address is in one of the allowed addresses or ranges.
    pub(crate) fn allows_address(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.entries.iter().any(|entry| match entry {
            Entry::Range { net, prefix } => in_range(address, *net, *prefix),
            _ => false,
        })
    }

    /// Whether some entry is an address or a range: only then can a name
    /// not allowed by name be allowed by what it resolves to.
    pub(crate) fn has_ranges(&self) -> bool {
        self.entries
            .iter()
            .any(|entry| matches!(entry, Entry::Range { .. }))
    }
}

impl std::fmt::Display for AllowedHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<String> = self
            .entries
            .iter()
            .map(|entry| match entry {
                Entry::Name(name) => name.clone(),
                Entry::Under(suffix) => format!("*.{suffix}"),
                Entry::Range { net, prefix } if *prefix == full(*net) => net.to_string(),
                Entry::Range { net, prefix } => format!("{net}/{prefix}"),
            })
            .collect();
        f.write_str(&shown.join(","))
    }
}

/// Written as `--allow-hosts` takes it (run.json).
impl serde::Serialize for AllowedHosts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 one, so `::ffff:10.0.0.1`
/// cannot slip past `10.0.0.0/8`.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

fn full(net: IpAddr) -> u8 {
    if net.is_ipv4() { 32 } else { 128 }
}

fn in_range(address: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (address, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            masked(u32::from(a).into(), prefix, 32) == u32::from(n).into()
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => masked(u128::from(a), prefix, 128) == u128::from(n),
        _ => false,
    }
}

/// `bits` (of a `width`-bit address) with only its first `prefix` kept.
fn masked(bits: u128, prefix: u8, width: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let drop = u32::from(width - prefix);
    (bits >> drop) << drop
}

fn entry(raw: &str) -> Result<Entry, HostsError> {
    let host = raw.trim().to_ascii_lowercase();
    let host = host.trim_end_matches('.');
    if host.is_empty() {
        return Err(HostsError::Empty);
    }
    let not_a_host = || HostsError::NotAHost(raw.to_owned());
    if let Some((net, prefix)) = host.split_once('/') {
        // Harbor's `ip_network(strict=True)`: no host bits set.
        let net: IpAddr = net.parse().map_err(|_| not_a_host())?;
        let prefix: u8 = prefix.parse().map_err(|_| not_a_host())?;
        if prefix > full(net) || !in_range(net, net, prefix) {
            return Err(not_a_host());
        }
        return Ok(Entry::Range { net, prefix });
    }
    if host.contains(':') {
        // Only an IPv6 literal (no zone) has a colon: a port does not.
        let address: std::net::Ipv6Addr = host.parse().map_err(|_| not_a_host())?;
        let net = IpAddr::V6(address);
        return Ok(Entry::Range { net, prefix: 128 });
    }
    if host.contains(['[', ']']) {
        return Err(not_a_host());
    }
    if let Some(suffix) = host.strip_prefix("*.") {
        if suffix.is_empty() || suffix.parse::<IpAddr>().is_ok() {
            return Err(HostsError::Wildcard(raw.to_owned()));
        }
        check_labels(suffix).ok_or_else(not_a_host)?;
        return Ok(Entry::Under(suffix.to_owned()));
    }
    if host.contains('*') {
        return Err(HostsError::Wildcard(raw.to_owned()));
    }
    if let Ok(IpAddr::V4(address)) = host.parse::<IpAddr>() {
        return Ok(Entry::Range {
            net: IpAddr::V4(address),
            prefix: 32,
        });
    }
    check_labels(host).ok_or_else(not_a_host)?;
    Ok(Entry::Name(host.to_owned()))
}

/// Harbor's label rule: letters, digits and hyphens, 1 to 63 of them,
/// not starting or ending with a hyphen.
fn check_labels(name: &str) -> Option<()> {
    name.split('.')
        .all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
        .then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(list: &str) -> AllowedHosts {
        AllowedHosts::parse_list(list).expect("a valid allowlist")
    }

    #[test]
    fn names_wildcards_addresses_and_ranges_are_read_as_harbor_reads_them() {
        let allowed = hosts(" PyPI.org. ,*.pythonhosted.org,10.1.2.3,192.168.0.0/16,2001:db8::/32");
        assert_eq!(
            allowed.entries(),
            &[
                Entry::Name("pypi.org".into()),
                Entry::Under("pythonhosted.org".into()),
                Entry::Range {
                    net: "10.1.2.3".parse().expect("an address"),
                    prefix: 32
                },
                Entry::Range {
                    net: "192.168.0.0".parse().expect("an address"),
                    prefix: 16
                },
                Entry::Range {
                    net: "2001:db8::".parse().expect("an address"),
                    prefix: 32
                },
            ]
        );
        assert_eq!(
            allowed.to_string(),
            "pypi.org,*.pythonhosted.org,10.1.2.3,192.168.0.0/16,2001:db8::/32"
        );
    }

    #[test]
    fn what_harbor_refuses_is_refused() {
        for bad in [
            "https://pypi.org",
            "pypi.org:443",
            "pypi.org/simple",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "*.",
            "*.10.0.0.1",
            "py*.org",
            "a.*.org",
            "[::1]",
            "under_score.org",
            "-lead.org",
            "fe80::1%eth0",
        ] {
            assert!(AllowedHosts::parse(&[bad]).is_err(), "{bad} was accepted");
        }
        assert_eq!(AllowedHosts::parse(&[" "]), Err(HostsError::Empty));
    }

    #[test]
    fn a_name_is_allowed_exactly_and_a_wildcard_allows_only_names_under_it() {
        let allowed = hosts("pypi.org,*.pythonhosted.org");
        for (name, allows) in [
            ("pypi.org", true),
            ("PYPI.ORG.", true),
            ("www.pypi.org", false),
            ("evilpypi.org", false),
            ("files.pythonhosted.org", true),
            ("a.b.pythonhosted.org", true),
            ("pythonhosted.org", false),
            ("evilpythonhosted.org", false),
            ("pythonhosted.org.evil.com", false),
        ] {
            assert_eq!(allowed.allows_name(name), allows, "{name}");
        }
    }

    #[test]
    fn an_address_is_allowed_by_its_literal_or_its_range_only() {
        let allowed = hosts("127.0.0.2,10.0.0.0/8,2001:db8::/32,pypi.org");
        for (address, allows) in [
            ("127.0.0.2", true),
            ("127.0.0.3", false),
            ("10.255.0.1", true),
            ("11.0.0.1", false),
            ("::ffff:10.0.0.1", true),
            ("::ffff:127.0.0.3", false),
            ("2001:db8:1::1", true),
            ("2001:db9::1", false),
        ] {
            let ip: IpAddr = address.parse().expect("an address");
            assert_eq!(allowed.allows_address(ip), allows, "{address}");
        }
        assert!(allowed.has_ranges());
        assert!(!hosts("pypi.org").has_ranges());
        assert!(hosts("0.0.0.0/0").allows_address("8.8.8.8".parse().expect("an address")));
    }
}

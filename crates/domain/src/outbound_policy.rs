//! The outbound policy: which addresses Capstan may call on a user's behalf (git provider APIs,
//! webhook receivers, and whatever else a user's record names). A user who can write an address
//! into a record must not be able to make Capstan reach its own network: loopback ports, the
//! private network around it, or the cloud metadata service. So only http and https are called,
//! and only public addresses, unless the operator names more in `CAPSTAN_OUTBOUND_ALLOW`
//! (self-hosted git servers on a private network are legitimate).
//!
//! The policy decides; the HTTP adapters apply it to every address they connect to (a URL that
//! names an address, each address a host name resolves to, each redirect).

use crate::ip_network::IpNetwork;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The setting that widens the policy.
pub const SETTING: &str = "CAPSTAN_OUTBOUND_ALLOW";

/// One entry of the allow list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    /// An address or a network.
    Network(IpNetwork),
    /// A host name, whatever it resolves to.
    Host(String),
    /// Every name under a domain (`*.corp.example`), not the domain itself.
    Under(String),
}

/// What may be called: public addresses over http(s), and what the allow list names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    allowed: Vec<Allowed>,
    /// Every address is allowed (the webhooks' own `CAPSTAN_WEBHOOK_ALLOW_PRIVATE`).
    every_address: bool,
    /// A switch that would allow a refused call too, named in refusals.
    hint: Option<&'static str>,
}

/// Why a call is refused. Its text names the host (never a URL, which may hold credentials)
/// and the setting that would allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    reason: Reason,
    /// Another setting that would allow it, besides `CAPSTAN_OUTBOUND_ALLOW`.
    also: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    Scheme(String),
    NotAUrl,
    Address(String),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Scheme(s) => write!(
                f,
                "refused by the outbound policy: the scheme '{s}' is not called (only http and https)"
            ),
            Reason::NotAUrl => {
                f.write_str("refused by the outbound policy: not an absolute http(s) URL")
            }
            Reason::Address(host) => {
                write!(
                    f,
                    "refused by the outbound policy: {host} is or resolves to a private, loopback, \
                     link-local or otherwise non-public address; name it in {SETTING} to allow it"
                )?;
                match self.also {
                    Some(also) => write!(f, " (or set {also}=true)"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for Refused {}

impl OutboundPolicy {
    /// Reads `CAPSTAN_OUTBOUND_ALLOW`: addresses (`10.0.0.5`, `::1`), networks (`10.0.0.0/8`,
    /// `fd00::/8`) and host names (`git.corp.example`, `localhost`, `*.corp.example`),
    /// separated by commas or spaces. The error names the entry at fault.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut allowed = Vec::new();
        for entry in list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|e| !e.is_empty())
        {
            allowed.push(entry_of(entry).ok_or_else(|| {
                format!(
                    "'{entry}' is neither an address, a network (address/prefix) nor a host name"
                )
            })?);
        }
        Ok(Self {
            allowed,
            ..Self::default()
        })
    }

    /// The same policy, allowing every address when `on`: a switch of its own (`setting`,
    /// e.g. the webhooks' `CAPSTAN_WEBHOOK_ALLOW_PRIVATE`), which refusals name too.
    pub fn allowing_every_address(self, setting: &'static str, on: bool) -> Self {
        Self {
            every_address: on,
            hint: Some(setting),
            ..self
        }
    }

    /// Whether `ip`, reached under the name `host` (the address itself when the URL names
    /// one), may be connected to.
    pub fn permits(&self, host: &str, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.every_address
            || is_public(ip)
            || self.allowed.iter().any(|a| match a {
                Allowed::Network(network) => network.contains(ip),
                Allowed::Host(name) => same_name(host, name),
                Allowed::Under(domain) => under(host, domain),
            })
    }

    /// Checks what can be checked before resolving: the scheme, and the host when it is an
    /// address. Host names are checked address by address when they resolve.
    pub fn check_url(&self, url: &str) -> Result<url::Url, Refused> {
        let parsed = url::Url::parse(url.trim()).map_err(|_| self.refused(Reason::NotAUrl))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(self.refused(Reason::Scheme(parsed.scheme().to_string())));
        }
        let ip = match parsed.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(url::Host::Domain(_)) => return Ok(parsed),
            None => return Err(self.refused(Reason::NotAUrl)),
        };
        if self.permits(&ip.to_string(), ip) {
            Ok(parsed)
        } else {
            Err(self.refusal(&ip.to_string()))
        }
    }

    /// The refusal of `host`, which resolves to no address the policy permits.
    pub fn refusal(&self, host: &str) -> Refused {
        self.refused(Reason::Address(host.to_string()))
    }

    /// Every refusal is also the operator's news (logged at WARN with its target and the
    /// setting that would allow it): the user who met it cannot widen the policy.
    fn refused(&self, reason: Reason) -> Refused {
        let refused = Refused {
            reason,
            also: self.hint,
        };
        tracing::warn!(refusal = %refused, "an outward call was refused by the outbound policy");
        refused
    }
}

fn entry_of(entry: &str) -> Option<Allowed> {
    if entry.contains('/') {
        return IpNetwork::parse(entry).map(Allowed::Network);
    }
    let bare = entry.trim_start_matches('[').trim_end_matches(']');
    if let Some(address) = IpNetwork::parse(bare) {
        return Some(Allowed::Network(address));
    }
    let name = entry.trim_end_matches('.').to_ascii_lowercase();
    match name.strip_prefix("*.") {
        Some(domain) => host_name(domain).then(|| Allowed::Under(domain.to_string())),
        None => host_name(&name).then_some(Allowed::Host(name)),
    }
}

/// A host name of one label or more (internal names such as `gitlab` are fine here).
fn host_name(name: &str) -> bool {
    (1..=253).contains(&name.len())
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
        // All digits and dots would be an address written oddly, not a name.
        && !name.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

fn same_name(host: &str, name: &str) -> bool {
    host.trim_end_matches('.').eq_ignore_ascii_case(name)
}

fn under(host: &str, domain: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host.strip_suffix(domain)
        .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.'))
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether an address is one a server may reach for anyone: not loopback, private,
/// link-local (cloud metadata lives there), shared (CGNAT), multicast, reserved or
/// unspecified, nor an IPv6 form that carries such an IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    // Addresses that carry an IPv4 address reach it: NAT64 (64:ff9b::/96, 64:ff9b:1::/48),
    // 6to4 (2002::/16) and the deprecated IPv4-compatible form (::a.b.c.d).
    let embedded = match s {
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(v4(hi, lo)),
        [0x64, 0xff9b, 1, ..] => Some(v4(s[6], s[7])),
        [0x2002, hi, lo, ..] => Some(v4(hi, lo)),
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 => Some(v4(hi, lo)),
        _ => None,
    };
    if let Some(v4) = embedded {
        return public_v4(v4);
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        // Site-local (deprecated), and Teredo, which tunnels to an address it hides.
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] == 0x2001 && s[1] == 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn private_and_loopback_addresses_are_not_public() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::a00:1",
            "2002:a00:1::1",
            "2001:0:4136:e378::1",
            "fec0::1",
            "198.18.0.1",
        ] {
            assert!(!is_public(ip(a)), "{a}");
        }
        for a in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_public(ip(a)), "{a}");
        }
    }

    #[test]
    fn by_default_only_public_addresses_over_http_are_called() {
        let p = OutboundPolicy::default();
        assert!(p.check_url("https://api.github.com/repos").is_ok());
        assert!(p.check_url("http://93.184.216.34:8080/x").is_ok());
        for url in [
            "http://127.0.0.1:9000/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]/",
            "http://[::ffff:10.0.0.1]/",
            "http://10.0.0.1/",
        ] {
            let err = p.check_url(url).unwrap_err().to_string();
            assert!(err.contains(SETTING), "{url}: {err}");
        }
        for url in [
            "file:///etc/passwd",
            "gopher://x.example/",
            "unix:/run/docker.sock",
        ] {
            let err = p.check_url(url).unwrap_err().to_string();
            assert!(err.contains("only http and https"), "{url}: {err}");
        }
        assert!(!p.permits("localhost", ip("127.0.0.1")));
        assert!(p.permits("example.com", ip("93.184.216.34")));
    }

    #[test]
    fn the_allow_list_names_addresses_networks_and_hosts() {
        let p = OutboundPolicy::parse(
            " 10.1.0.0/16, 127.0.0.1 fd00::/8,[::1] git.corp.example. *.lab.example,gitlab",
        )
        .unwrap_or_default();
        assert!(p.permits("10.1.2.3", ip("10.1.2.3")));
        assert!(p.permits("10.1.2.3", ip("::ffff:10.1.2.3")), "mapped");
        assert!(!p.permits("10.2.0.1", ip("10.2.0.1")));
        assert!(p.permits("x", ip("127.0.0.1")));
        assert!(!p.permits("x", ip("127.0.0.2")));
        assert!(p.permits("x", ip("fd12::1")));
        assert!(p.permits("x", ip("::1")));
        assert!(
            p.permits("GIT.corp.example", ip("10.9.9.9")),
            "a name, whatever its address"
        );
        assert!(p.permits("ci.lab.example", ip("192.168.0.4")));
        assert!(
            !p.permits("lab.example", ip("192.168.0.4")),
            "only names under it"
        );
        assert!(!p.permits("evil-lab.example", ip("192.168.0.4")));
        assert!(p.permits("gitlab", ip("172.16.0.9")));
        assert!(!p.permits("other.corp.example", ip("169.254.169.254")));
        assert!(p.check_url("http://10.1.0.7:3000/api/v4").is_ok());
        assert_eq!(
            OutboundPolicy::parse("").unwrap_or_default(),
            OutboundPolicy::default()
        );
        for bad in [
            "10.0.0.0/33",
            "not a/host",
            "bad_-.",
            "::1/129",
            "1.2.3",
            "a..b",
        ] {
            let err = OutboundPolicy::parse(bad).unwrap_err();
            assert!(err.contains('\''), "{bad}: {err}");
        }
        let big = OutboundPolicy::parse("0.0.0.0/0").unwrap_or_default();
        assert!(
            big.permits("x", ip("169.254.169.254")),
            "the operator's choice"
        );
    }

    #[test]
    fn a_switch_of_its_own_allows_every_address_and_is_named() {
        let off = OutboundPolicy::default()
            .allowing_every_address("CAPSTAN_WEBHOOK_ALLOW_PRIVATE", false);
        let err = off.check_url("http://127.0.0.1/").unwrap_err().to_string();
        assert!(
            err.contains(SETTING) && err.contains("CAPSTAN_WEBHOOK_ALLOW_PRIVATE=true"),
            "{err}"
        );
        let on =
            OutboundPolicy::default().allowing_every_address("CAPSTAN_WEBHOOK_ALLOW_PRIVATE", true);
        assert!(on.check_url("http://127.0.0.1/").is_ok());
        assert!(
            on.check_url("ftp://127.0.0.1/").is_err(),
            "schemes stay refused"
        );
    }
}

//! Addresses and networks as operators write them in allow lists (`10.0.0.0/8`, `fd00::/8`,
//! `127.0.0.1`): what the outbound policy and the router's trusted proxies both read.

use std::net::IpAddr;

/// A network: its first address and its prefix length (a whole address: its length). An
/// IPv4-mapped IPv6 address or network is its IPv4 self, as dual-stack sockets see peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNetwork {
    base: IpAddr,
    prefix: u8,
}

impl IpNetwork {
    /// `address` or `address/prefix`; none when it is neither.
    pub fn parse(entry: &str) -> Option<Self> {
        let (address, prefix) = match entry.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (entry, None),
        };
        let address: IpAddr = address.parse().ok()?;
        // Written as IPv4-mapped, it is the IPv4 network peers are compared as.
        let (address, mapped) = match address.to_canonical() {
            canonical @ IpAddr::V4(_) if address.is_ipv6() => (canonical, 96),
            same => (same, 0),
        };
        let bits = bits_of(address);
        let prefix = match prefix {
            None => bits,
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p >= mapped && p - mapped <= bits => p - mapped,
                _ => return None,
            },
        };
        Some(Self {
            base: masked(address, prefix)?,
            prefix,
        })
    }

    /// Whether `ip` (its IPv4 self when IPv4-mapped) is in the network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        masked(ip.to_canonical(), self.prefix) == Some(self.base)
    }
}

fn bits_of(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// The first address of `ip`'s network of `prefix` bits; none when the prefix is longer than
/// the address.
fn masked(ip: IpAddr, prefix: u8) -> Option<IpAddr> {
    let kept = u32::from(bits_of(ip)).checked_sub(u32::from(prefix))?;
    Some(match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(kept).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(kept).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    })
}

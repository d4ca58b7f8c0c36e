//! The installation's own Docker host's firewall around what Capstan runs. Every network
//! Capstan makes has a bridge named `cap…` (see [`crate::plan::bridge_name`]), so two fixed
//! jumps cover all of them, present and future:
//! - forwarded traffic from them (Docker's `DOCKER-USER` chain) may not reach link-local
//!   addresses, the cloud's metadata service (169.254.169.254) among them;
//! - traffic from them to the host itself (the `INPUT` chain: the network's gateway address,
//!   or any other of the host's) is refused, but for replies to what the host opened and DNS.
//!
//! The rules live in chains of Capstan's own, added once and checked at every start (several
//! instances and installations sharing the host keep the same rules).

use domain::engine::EngineError;
use tokio::process::Command;

/// The interfaces the rules apply to: every bridge of a network Capstan made.
pub const INTERFACES: &str = "cap+";
/// The chain of what Capstan's workloads may not forward to.
pub const FORWARD_CHAIN: &str = "CAPSTAN-FORWARD";
/// The chain of what Capstan's workloads may not send to the host itself.
pub const INPUT_CHAIN: &str = "CAPSTAN-INPUT";

/// The rules, chain by chain, in order: (chain, rule).
fn rules() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (FORWARD_CHAIN, vec!["-d", "169.254.0.0/16", "-j", "REJECT"]),
        (
            INPUT_CHAIN,
            vec![
                "-m",
                "conntrack",
                "--ctstate",
                "ESTABLISHED,RELATED",
                "-j",
                "RETURN",
            ],
        ),
        (
            INPUT_CHAIN,
            vec!["-p", "udp", "--dport", "53", "-j", "RETURN"],
        ),
        (
            INPUT_CHAIN,
            vec!["-p", "tcp", "--dport", "53", "-j", "RETURN"],
        ),
        (INPUT_CHAIN, vec!["-j", "REJECT"]),
    ]
}

/// The jumps into Capstan's chains from the chains traffic passes: (chain, target).
const JUMPS: [(&str, &str); 2] = [("DOCKER-USER", FORWARD_CHAIN), ("INPUT", INPUT_CHAIN)];

async fn iptables(args: &[&str]) -> Result<(), EngineError> {
    let out = Command::new("iptables")
        .arg("-w")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("iptables could not be run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into())
    }
}

/// Adds `rule` to `chain` unless it is there; `first`: at the top of the chain.
async fn ensure(chain: &str, rule: &[&str], first: bool) -> Result<(), EngineError> {
    let check = [&["-C", chain][..], rule].concat();
    if iptables(&check).await.is_ok() {
        return Ok(());
    }
    let add = if first {
        [&["-I", chain, "1"][..], rule].concat()
    } else {
        [&["-A", chain][..], rule].concat()
    };
    iptables(&add).await
}

/// Puts the rules in place (what is there already stays); what failed when not all could be.
pub async fn guard() -> Result<(), EngineError> {
    for chain in [FORWARD_CHAIN, INPUT_CHAIN] {
        // Made by another start meanwhile, or before: either way it is there.
        let _ = iptables(&["-N", chain]).await;
    }
    for (chain, rule) in rules() {
        ensure(chain, &rule, false).await?;
    }
    for (chain, target) in JUMPS {
        ensure(chain, &["-i", INTERFACES, "-j", target], true).await?;
    }
    Ok(())
}

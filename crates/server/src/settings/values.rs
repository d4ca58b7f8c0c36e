//! The checks of one setting's value, as clap's value parsers: clap runs them on what the flag
//! or the variable gives, and a refusal names the setting from clap's own declaration
//! ([`super::refusal`]), so no check repeats a setting's name.

use super::EngineChoice;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// An on/off setting.
pub(super) fn on_off(raw: &str) -> Result<bool, String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(format!("'{other}' is not on or off")),
    }
}

/// A whole number of `unit` of at least 1.
fn positive(raw: &str, unit: &str) -> Result<u64, String> {
    match raw.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ if unit.is_empty() => Err(format!("'{raw}' is not a whole number of at least 1")),
        _ => Err(format!(
            "'{raw}' is not a whole number of {unit} of at least 1"
        )),
    }
}

pub(super) fn at_least_one(raw: &str) -> Result<u64, String> {
    positive(raw, "")
}

pub(super) fn per_hour(raw: &str) -> Result<u32, String> {
    match raw.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("'{raw}' is not a whole number of at least 1")),
    }
}

pub(super) fn images_at_least_one(raw: &str) -> Result<usize, String> {
    positive(raw, "images").map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

pub(super) fn milliseconds_at_least_one(raw: &str) -> Result<Duration, String> {
    positive(raw, "milliseconds").map(Duration::from_millis)
}

pub(super) fn seconds_at_least_one(raw: &str) -> Result<Duration, String> {
    positive(raw, "seconds").map(Duration::from_secs)
}

pub(super) fn milliseconds(raw: &str) -> Result<u64, String> {
    raw.trim()
        .parse::<u64>()
        .map_err(|_| format!("'{raw}' is not a whole number of milliseconds"))
}

/// A whole number from 1 to `most`.
pub(super) fn within(raw: &str, most: u64) -> Result<u64, String> {
    match raw.trim().parse::<u64>() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(format!("'{raw}' is not a whole number from 1 to {most}")),
    }
}

pub(super) fn listen_address(raw: &str) -> Result<SocketAddr, String> {
    raw.trim()
        .parse()
        .map_err(|_| format!("'{raw}' is not an address like 127.0.0.1:8080"))
}

/// An address to listen on, or none (`off`).
#[derive(Debug, Clone, Copy)]
pub struct MaybeAddress(pub Option<SocketAddr>);

pub(super) fn address_or_off(raw: &str) -> Result<MaybeAddress, String> {
    match raw.trim() {
        "off" => Ok(MaybeAddress(None)),
        at => at
            .parse()
            .map(|at| MaybeAddress(Some(at)))
            .map_err(|_| format!("'{at}' is neither an address like 0.0.0.0:80 nor off")),
    }
}

pub(super) fn ip_address(raw: &str) -> Result<IpAddr, String> {
    raw.trim()
        .parse()
        .map_err(|_| format!("'{raw}' is not an IP address (such as 127.0.0.1 or 0.0.0.0)"))
}

pub(super) fn engine(raw: &str) -> Result<EngineChoice, String> {
    match raw.trim() {
        "auto" => Ok(EngineChoice::Auto),
        "docker" => Ok(EngineChoice::Docker),
        "simulated" => Ok(EngineChoice::Simulated),
        other => Err(format!(
            "'{other}' is not a known engine (known: auto, docker, simulated)"
        )),
    }
}

/// Whether the clock is the manual one (the stand-in's) rather than the system's.
pub(super) fn manual_clock(raw: &str) -> Result<bool, String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "system" | "" => Ok(false),
        "manual" => Ok(true),
        other => Err(format!("'{other}' is neither system nor manual")),
    }
}

pub(super) fn log_filter(raw: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(raw)
        .map(|_| raw.to_string())
        .map_err(|e| format!("'{raw}' is not a log filter: {e}"))
}

//! wrk, run from the benchmarks: one run against a URL, its rate, latencies and errors.

use std::process::Command;

/// A number from the environment, or its default.
pub fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one wrk run measured: requests per second, the latency percentiles wrk reports, and
/// how many answers were not 2xx/3xx.
pub struct Measured {
    pub rate: f64,
    pub p50: String,
    pub p99: String,
    pub errors: u64,
}

/// One wrk run against `url` with `headers`; `script` (Lua) shapes the requests.
/// `CAPSTAN_BENCH_SECS` sets its length (default 5), `CAPSTAN_BENCH_CONNECTIONS` wrk's
/// connections (default 64), `CAPSTAN_BENCH_THREADS` wrk's threads (default 2).
pub fn wrk(url: &str, headers: &[String], script: Option<&str>) -> Measured {
    let secs = setting("CAPSTAN_BENCH_SECS", 5);
    let connections = setting("CAPSTAN_BENCH_CONNECTIONS", 64);
    let threads = setting("CAPSTAN_BENCH_THREADS", 2);
    let dir = std::env::temp_dir().join(format!("capstan-wrk-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new("wrk");
    cmd.args([
        &format!("-t{threads}"),
        &format!("-c{connections}"),
        &format!("-d{secs}s"),
        "--latency",
    ]);
    for header in headers {
        cmd.arg("-H").arg(header);
    }
    if let Some(lua) = script {
        let file = dir.join("scenario.lua");
        std::fs::write(&file, lua).unwrap();
        cmd.arg("-s").arg(file);
    }
    let out = cmd.arg(url).output().expect("run wrk");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "wrk failed: {text}");
    let field = |prefix: &str| -> Option<String> {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(str::to_string)
    };
    let errors = text
        .lines()
        .find(|l| l.contains("Non-2xx or 3xx responses"))
        .and_then(|l| l.rsplit(':').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Measured {
        rate: field("Requests/sec:")
            .and_then(|r| r.parse().ok())
            .unwrap_or(0.0),
        p50: field("50%").unwrap_or_default(),
        p99: field("99%").unwrap_or_default(),
        errors,
    }
}

/// Whether wrk is installed; says how to install it when not.
pub fn wrk_installed() -> bool {
    let there = Command::new("wrk").arg("--version").output().is_ok();
    if !there {
        println!("wrk is not installed: apt-get install wrk");
    }
    there
}

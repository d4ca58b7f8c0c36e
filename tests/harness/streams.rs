//! Server-sent event streams, read as a client would.

use super::*;

/// What a [`Stream`] saw.
#[derive(Debug, Default)]
pub struct Streamed {
    pub answered: usize,
    /// Each failed request: its status, or why it had none.
    pub failures: Vec<String>,
    /// The hosts that answered (the `HOSTNAME=` line of each answer).
    pub hosts: std::collections::BTreeSet<String>,
}

/// Requests sent through the router without a pause, two at a time on kept-alive
/// connections, until stopped.
pub struct Stream {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Streamed>>,
}

impl Stream {
    pub fn start(link: &str, path: &str) -> Stream {
        let rest = link.strip_prefix("http://").expect("an http link");
        let (host, port) = rest.rsplit_once(':').expect("a link with its port");
        let (url, host) = (format!("http://127.0.0.1:{port}{path}"), host.to_string());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let http = reqwest::Client::new();
        let tasks = (0..2)
            .map(|_| {
                let (stop, http, url, host) =
                    (stop.clone(), http.clone(), url.clone(), host.clone());
                tokio::spawn(async move {
                    let mut seen = Streamed::default();
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                        seen.answered += 1;
                        match http.get(&url).header("host", &host).send().await {
                            Ok(answer) if answer.status() == 200 => {
                                let body = answer.text().await.unwrap_or_default();
                                if let Some(name) =
                                    body.lines().find_map(|l| l.strip_prefix("HOSTNAME="))
                                {
                                    seen.hosts.insert(name.to_string());
                                }
                            }
                            Ok(answer) => seen.failures.push(answer.status().to_string()),
                            Err(e) => seen.failures.push(e.to_string()),
                        }
                    }
                    seen
                })
            })
            .collect();
        Stream { stop, tasks }
    }

    pub async fn stop(self) -> Streamed {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut all = Streamed::default();
        for task in self.tasks {
            let seen = task.await.unwrap();
            all.answered += seen.answered;
            all.failures.extend(seen.failures);
            all.hosts.extend(seen.hosts);
        }
        all
    }
}

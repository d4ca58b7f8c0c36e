//! A test ACME authority (Debian's pebble).

use super::*;

/// A test ACME authority: Debian's pebble, serving its directory on 127.0.0.1 with a
/// certificate of `test_certificate`'s authority, every name it validates resolved to
/// 127.0.0.1 by pebble-challtestsrv's DNS, and TLS-ALPN-01 challenges asked of
/// 127.0.0.1:`tls_port`. Stopped when dropped.
pub struct Pebble {
    children: Vec<Child>,
    /// The ACME directory's URL.
    pub directory: String,
    /// The authority of the directory's own HTTPS (PEM file).
    pub trust: PathBuf,
    management: u16,
    _dir: TempDir,
}

impl Pebble {
    /// Started on ports found free; again on others when one was taken meanwhile (pebble
    /// then ends at once).
    pub async fn start(tls_port: u16) -> Pebble {
        let mut why = String::new();
        for _ in 0..3 {
            match Self::started(tls_port).await {
                Ok(pebble) => return pebble,
                Err(said) => why = said,
            }
        }
        panic!("pebble did not start: {why}");
    }

    async fn started(tls_port: u16) -> Result<Pebble, String> {
        let dir = TempDir::new();
        test_certificate(&dir.0, "localhost");
        let (listen, management, dns) = (free_port(), free_port(), free_port());
        let config = dir.0.join("pebble.json");
        let file = |name: &str| dir.0.join(name).to_str().unwrap().to_string();
        std::fs::write(
            &config,
            json!({"pebble": {
                "listenAddress": format!("127.0.0.1:{listen}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": file("localhost.crt"),
                "privateKey": file("localhost.key"),
                "httpPort": free_port(),
                "tlsPort": tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false,
            }})
            .to_string(),
        )
        .unwrap();
        let log = |name: &str| Stdio::from(std::fs::File::create(dir.0.join(name)).unwrap());
        let dns_server = Command::new("pebble-challtestsrv")
            .args(["-dns01", &format!("127.0.0.1:{dns}")])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdout(log("challtestsrv.log"))
            .stderr(log("challtestsrv.err"))
            .spawn()
            .expect("pebble-challtestsrv runs (Debian's package pebble)");
        let pebble = Command::new("pebble")
            .args(["-config", config.to_str().unwrap()])
            .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
            // No random waits before validating, and no nonce refused on purpose.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdout(log("pebble.log"))
            .stderr(log("pebble.err"))
            .spawn()
            .expect("pebble runs (Debian's package pebble)");
        let errors = dir.0.join("pebble.err");
        let pebble = Pebble {
            children: vec![dns_server, pebble],
            directory: format!("https://127.0.0.1:{listen}/dir"),
            trust: dir.0.join("ca.pem"),
            management,
            _dir: dir,
        };
        let started = Instant::now();
        while pebble.get(&pebble.directory).await.is_err() {
            if started.elapsed() > Duration::from_secs(20) {
                return Err(std::fs::read_to_string(&errors).unwrap_or_default());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(pebble)
    }

    async fn get(&self, url: &str) -> reqwest::Result<String> {
        let trust = std::fs::read(&self.trust).unwrap();
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&trust).unwrap())
            .build()?
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    }

    /// The root of what pebble issues (PEM); a new one each time pebble starts.
    pub async fn issuer(&self) -> Vec<u8> {
        self.get(&format!("https://127.0.0.1:{}/roots/0", self.management))
            .await
            .unwrap()
            .into_bytes()
    }
}

impl Pebble {
    /// Stops the authority (its files stay until it is dropped).
    pub fn stop(&mut self) {
        for mut child in self.children.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        self.stop();
    }
}

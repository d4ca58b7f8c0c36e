//! An API client of the server, the live API's sockets, and the records most tests start
//! from.

use super::*;

pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl Client {
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("Token {}", self.token));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        assert!(res.headers().contains_key("x-request-id"));
        let body = res.json().await.unwrap_or(Value::Null);
        (status, body)
    }
    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
    pub async fn create(&self, path: &str, body: Value) -> String {
        let (status, body) = self.call(reqwest::Method::POST, path, Some(body)).await;
        assert_eq!(status, 201, "POST {path}: {body}");
        body["id"].as_str().unwrap().to_string()
    }
}

pub async fn settle(client: &Client, path: &str, within: Duration) -> Value {
    let seen = std::cell::RefCell::new(Value::Null);
    eventually(
        within,
        || format!("{path} never settled: {}", seen.borrow()),
        async || {
            let status = client.get(path).await;
            let settled = status["deployment_requests_count"] == json!(0);
            *seen.borrow_mut() = status.clone();
            settled.then_some(status)
        },
    )
    .await
}

/// An organization's environment with a cluster and project; returns (token, environment id).
pub async fn environment(dir: &TempDir, database: &str, server: &Server) -> (Client, String) {
    let token = create_token(dir, database, &["--organization-name", "Crashers"]);
    let client = Client {
        http: reqwest::Client::new(),
        base: server.base.clone(),
        token,
    };
    let (_, env) = hierarchy(&client).await;
    (client, env)
}

/// The client's organization.
pub async fn hierarchy_org(client: &Client) -> String {
    client.get("/organization").await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A cluster, a project and an environment in the client's organization: (organization, environment).
pub async fn hierarchy(client: &Client) -> (String, String) {
    let org = hierarchy_org(client).await;
    client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({"name": "c", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
        )
        .await;
    let project = client
        .create(
            &format!("/organization/{org}/project"),
            json!({"name": "p"}),
        )
        .await;
    let env = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "e"}),
        )
        .await;
    (org, env)
}

/// `envs` more environments beside `env`, each with `per_env` databases; returns the databases.
pub async fn databases(client: &Client, env: &str, envs: usize, per_env: usize) -> Vec<String> {
    let project = client.get(&format!("/environment/{env}")).await["project"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut services = Vec::new();
    for e in 0..envs {
        let env = client
            .create(
                &format!("/project/{project}/environment"),
                json!({"name": format!("env{e}")}),
            )
            .await;
        for s in 0..per_env {
            services.push(
                client
                    .create(
                        &format!("/environment/{env}/database"),
                        json!({"name": format!("db{s}"), "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
                    )
                    .await,
            );
        }
    }
    services
}

/// A container in `env` (with a registry of its own); its id.
pub async fn container_in(client: &Client, org: &str, env: &str, name: &str) -> String {
    let registry = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": format!("hub-{name}"), "kind": "DOCKER_HUB", "config": {}}),
        )
        .await;
    client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": name, "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await
}

/// A socket of the live API.
pub struct Live {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

/// Opens `path_and_query` of the live API on `base`, with `authorization` as its header when
/// given; a refused handshake gives its status and body.
pub async fn live(
    base: &str,
    path_and_query: &str,
    authorization: Option<&str>,
) -> Result<Live, (u16, String)> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("{}{path_and_query}", base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    if let Some(value) = authorization {
        request
            .headers_mut()
            .insert("Authorization", value.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(Live { socket }),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).to_string())
                .unwrap_or_default();
            Err((response.status().as_u16(), body))
        }
        Err(e) => panic!("could not open {path_and_query}: {e}"),
    }
}

impl Live {
    /// The next JSON message within `within`, or none (the socket stayed silent, or closed).
    pub async fn next(&mut self, within: Duration) -> Option<Value> {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let message = tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .ok()??
                .ok()?;
            match message {
                Message::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
                Message::Close(_) => return None,
                _ => continue,
            }
        }
    }

    /// Reads messages until one satisfies `wanted`, within `within`; panics with the messages
    /// seen otherwise.
    pub async fn until(&mut self, within: Duration, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.next(left).await {
                Some(m) if wanted(&m) => return m,
                Some(m) => seen.push(m),
                None => break,
            }
        }
        panic!("no wanted message in {within:?}; seen: {seen:#?}");
    }

    /// The close frame's code and reason, once the server closes the socket within `within`
    /// (messages before it are skipped); none if it stays open or ends without one.
    pub async fn closed(&mut self, within: Duration) -> Option<(u16, String)> {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .ok()??
                .ok()?
            {
                Message::Close(Some(frame)) => {
                    return Some((u16::from(frame.code), frame.reason.to_string()))
                }
                Message::Close(None) => return None,
                _ => continue,
            }
        }
    }

    /// Sends `bytes` as one binary frame (a shell's standard input).
    pub async fn send(&mut self, bytes: &[u8]) {
        use futures_util::SinkExt;
        use tokio_tungstenite::tungstenite::Message;
        self.socket
            .send(Message::Binary(bytes.to_vec().into()))
            .await
            .expect("the socket takes input");
    }

    /// What binary frames bring (a shell's terminal) until it holds `wanted`, within
    /// `within`; panics with what came otherwise.
    pub async fn output_until(&mut self, within: Duration, wanted: &str) -> String {
        let (seen, closed) = self.output(within, Some(wanted)).await;
        assert!(
            seen.contains(wanted),
            "no {wanted:?} within {within:?} (closed: {closed:?}): {seen:?}"
        );
        seen
    }

    /// What binary frames bring until the server closes the socket within `within`, and the
    /// close frame's code and reason (none: it stayed open, or ended without one).
    pub async fn output_until_closed(
        &mut self,
        within: Duration,
    ) -> (String, Option<(u16, String)>) {
        self.output(within, None).await
    }

    async fn output(
        &mut self,
        within: Duration,
        wanted: Option<&str>,
    ) -> (String, Option<(u16, String)>) {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + within;
        let mut seen = String::new();
        loop {
            if wanted.is_some_and(|w| seen.contains(w)) {
                return (seen, None);
            }
            let next = tokio::time::timeout_at(deadline, self.socket.next()).await;
            match next {
                Ok(Some(Ok(Message::Binary(bytes)))) => {
                    seen.push_str(&String::from_utf8_lossy(&bytes));
                }
                Ok(Some(Ok(Message::Close(frame)))) => {
                    return (
                        seen,
                        frame.map(|f| (u16::from(f.code), f.reason.to_string())),
                    )
                }
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) | Err(_) => return (seen, None),
            }
        }
    }
}

//! The audit log and the live stream, on both backends.

use crate::common;

use actix_web::body::MessageBody;
use actix_web::test;
use common::{App, T};
use domain::auth::Role;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

http_suite!(
    every_write_is_audited_with_who_what_and_where,
    the_audit_log_pages_by_time_and_filters,
    the_stream_delivers_in_order_and_resumes_after_the_last_event_seen
);

fn events(body: &Value) -> Vec<Value> {
    body["events"].as_array().unwrap().clone()
}

/// The audit events of `path` (newest first) once `enough` says so.
async fn audit<S: App>(t: &T<S>, path: &str, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let seen = std::cell::RefCell::new(Vec::new());
    common::eventually(
        Duration::from_secs(15),
        || format!("{:#?}", seen.borrow()),
        async || {
            let got = events(&t.get(path).await.expect(200).body);
            let done = enough(&got);
            *seen.borrow_mut() = got.clone();
            done.then_some(got)
        },
    )
    .await
}

/// An event's timestamp, as the instant it names.
fn instant(e: &Value) -> time::OffsetDateTime {
    let text = e["timestamp"].as_str().unwrap();
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| panic!("{text} is not RFC 3339"))
}

fn find<'a>(events: &'a [Value], event_type: &str, target_type: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event_type"] == event_type && e["target_type"] == target_type)
        .unwrap_or_else(|| panic!("no {event_type} {target_type} in {events:#?}"))
}

async fn every_write_is_audited_with_who_what_and_where<S: App>(t: T<S>) {
    let org = t.org.clone();
    let (cluster, project, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    let secret = t
        .post(
            &format!("/container/{container}/secret"),
            json!({"key": "DB_PASSWORD", "value": "hunter2-audited"}),
        )
        .await
        .expect(201)
        .id();
    t.put(
        &format!("/project/{project}"),
        json!({"name": "shop", "description": "the shop"}),
    )
    .await
    .expect(200);
    t.delete(&format!("/container/{container}/secret/{secret}"))
        .await
        .expect(204);
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{container}/status")).await;
    let log = format!("/organization/{org}/events?pageSize=100");
    let all = audit(&t, &log, |e| {
        e.iter().any(|e| e["event_type"] == "DEPLOYED")
    })
    .await;
    let text = serde_json::to_string(&all).unwrap();
    assert!(
        !text.contains("hunter2"),
        "a secret value in the log: {text}"
    );
    for e in &all {
        assert_eq!(e["origin"], "API", "{e}");
        assert!(
            e["triggered_by"].as_str().unwrap().starts_with("token:"),
            "{e}"
        );
        assert!(e["timestamp"].is_string() && e["id"].is_string(), "{e}");
    }
    // Compared as instants: RFC 3339 drops trailing zeros of the fraction, so
    // "…00.1Z" and "…00.15Z" do not sort as text.
    let stamps: Vec<time::OffsetDateTime> = all.iter().map(instant).collect();
    let mut sorted = stamps.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(stamps, sorted, "newest first");
    let c = find(&all, "CREATE", "CLUSTER");
    assert_eq!(c["target_id"], cluster);
    assert_eq!(c["target_name"], "main");
    let p = find(&all, "UPDATE", "PROJECT");
    assert_eq!(p["target_id"], project);
    assert_eq!(p["project_id"], project);
    assert_eq!(p["project_name"], "shop");
    let e = find(&all, "CREATE", "ENVIRONMENT");
    assert_eq!(e["environment_id"], env);
    assert_eq!(e["environment_name"], "prod");
    assert_eq!(e["project_name"], "shop");
    let s = find(&all, "CREATE", "CONTAINER");
    assert_eq!(s["target_id"], container);
    assert_eq!(s["target_name"], "web");
    assert_eq!(s["environment_name"], "prod");
    let made = all
        .iter()
        .find(|e| e["event_type"] == "CREATE" && e["sub_target_type"] == "SECRET")
        .unwrap();
    assert_eq!(made["target_id"], container);
    // A part of a service is named by its service, environment and project.
    assert_eq!(made["target_type"], "CONTAINER", "{made}");
    assert_eq!(made["target_name"], "web", "{made}");
    assert_eq!(made["environment_id"], env, "{made}");
    assert_eq!(made["environment_name"], "prod", "{made}");
    assert_eq!(made["project_id"], project, "{made}");
    assert_eq!(made["project_name"], "shop", "{made}");
    assert!(
        made["change"].as_str().unwrap().contains("DB_PASSWORD"),
        "{made}"
    );
    assert!(all
        .iter()
        .any(|e| e["event_type"] == "DELETE" && e["sub_target_type"] == "SECRET"));
    let registry = find(&all, "CREATE", "CONTAINER_REGISTRY");
    assert!(registry["target_name"]
        .as_str()
        .unwrap()
        .starts_with("hub-"));
    let queued = find(&all, "DEPLOY_QUEUED", "CONTAINER");
    assert_eq!(queued["target_id"], container);
    let deployed = find(&all, "DEPLOYED", "CONTAINER");
    assert_eq!(deployed["target_id"], container);
    assert_eq!(deployed["project_name"], "shop");
    // Progress (started, each state) is the stream's; the log keeps what happened.
    assert!(all.iter().all(|e| !e["event_type"].is_null()));
    // A refused write records nothing.
    let before = all.len();
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "shop"}),
    )
    .await
    .expect(409);
    let viewer = t.token_with_role(Role::Viewer).await;
    let r = t
        .call(
            Some(&viewer),
            actix_web::http::Method::POST,
            &format!("/organization/{org}/project"),
            Some(json!({"name": "other"})),
        )
        .await;
    assert_eq!(r.status, 403);
    // VIEWER reads the log.
    let r = t
        .call(Some(&viewer), actix_web::http::Method::GET, &log, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(events(&r.body).len(), before);
    // The client's agent is kept, and names the origin.
    let req = test::TestRequest::post()
        .uri(&format!("/organization/{org}/project"))
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("User-Agent", "qovery-cli/1.2.3"))
        .set_json(json!({"name": "from-the-cli"}))
        .to_request();
    assert_eq!(test::call_service(&t.svc, req).await.status(), 201);
    let latest = &events(&t.get(&log).await.expect(200).body)[0];
    assert_eq!(latest["target_name"], "from-the-cli");
    assert_eq!(latest["origin"], "CLI");
    assert_eq!(latest["user_agent"], "qovery-cli/1.2.3");
}

async fn the_audit_log_pages_by_time_and_filters<S: App>(t: T<S>) {
    let org = t.org.clone();
    let mut projects = Vec::new();
    for i in 0..5 {
        projects.push(
            t.post(
                &format!("/organization/{org}/project"),
                json!({"name": format!("p{i}")}),
            )
            .await
            .expect(201)
            .id(),
        );
    }
    let base = format!("/organization/{org}/events");
    let first = t
        .get(&format!(
            "{base}?pageSize=2&eventType=CREATE&targetType=PROJECT"
        ))
        .await
        .expect(200);
    let names = |b: &Value| -> Vec<String> {
        events(b)
            .iter()
            .map(|e| e["target_name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&first.body), ["p4", "p3"]);
    assert!(first.body["links"]["previous"].is_null());
    let next = first.body["links"]["next"].as_str().unwrap().to_string();
    assert!(
        next.contains("continueToken=") && next.contains("eventType=CREATE"),
        "{next}"
    );
    let path = |link: &str| link[link.find("/organization").unwrap()..].to_string();
    let second = t.get(&path(&next)).await.expect(200);
    assert_eq!(names(&second.body), ["p2", "p1"]);
    let back = second.body["links"]["previous"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(back.contains("stepBackToken="), "{back}");
    let again = t.get(&path(&back)).await.expect(200);
    assert_eq!(names(&again.body), ["p4", "p3"]);
    let third = t
        .get(&path(second.body["links"]["next"].as_str().unwrap()))
        .await
        .expect(200);
    assert_eq!(names(&third.body), ["p0"]);
    assert!(third.body["links"]["next"].is_null());
    // One target.
    let one = t
        .get(&format!(
            "{base}?targetType=PROJECT&targetId={}",
            projects[2]
        ))
        .await
        .expect(200);
    assert_eq!(names(&one.body), ["p2"]);
    // A time range, in the public API's nanoseconds.
    let stamp = |e: &Value| instant(e).unix_timestamp_nanos();
    let all = events(
        &t.get(&format!("{base}?pageSize=100&targetType=PROJECT"))
            .await
            .body,
    );
    let (from, to) = (stamp(&all[3]), stamp(&all[1]));
    let ranged = t
        .get(&format!(
            "{base}?targetType=PROJECT&fromTimestamp={from}&toTimestamp={to}"
        ))
        .await
        .expect(200);
    assert_eq!(names(&ranged.body), ["p3", "p2", "p1"]);
    // What the query must hold.
    for (query, message) in [
        ("pageSize=0", "pageSize"),
        ("pageSize=abc", "pageSize"),
        ("eventType=BOUNCE", "eventType"),
        ("origin=SOMEWHERE", "origin"),
        ("targetId=not-a-uuid&targetType=PROJECT", "targetId"),
        (&format!("targetId={}", projects[0]), "targetId"),
        ("fromTimestamp=yesterday", "fromTimestamp"),
        ("continueToken=1&stepBackToken=2", "continueToken"),
    ] {
        t.get(&format!("{base}?{query}"))
            .await
            .expect_error(400, message);
    }
    // The resources the log is about, each once, most recent first.
    let targets = t
        .get(&format!("/organization/{org}/targets?targetType=PROJECT"))
        .await
        .expect(200);
    let listed: Vec<&str> = targets.body["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["p4", "p3", "p2", "p1", "p0"]);
    assert_eq!(targets.body["targets"][4]["id"], projects[0]);
    let levels = t
        .get(&format!(
            "/organization/{org}/targets?targetType=PROJECT&targetLevelToFetch=PROJECT&eventType=CREATE"
        ))
        .await
        .expect(200);
    assert_eq!(levels.body["targets"].as_array().unwrap().len(), 5);
    t.get(&format!(
        "/organization/{org}/targets?targetLevelToFetch=SERVICE"
    ))
    .await
    .expect_error(400, "targetLevelToFetch");
    t.get("/organization/not-an-id/events")
        .await
        .expect_error(400, "organizationId");
    t.get("/organization/not-an-id/events/stream")
        .await
        .expect_error(400, "organizationId");
    let other = t.other_org_token().await;
    let r = t
        .call(Some(&other), actix_web::http::Method::GET, &base, None)
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

/// Reads the stream's body until `count` events have come; returns them as (id, event, data).
async fn read_events<B: MessageBody>(
    body: &mut std::pin::Pin<Box<B>>,
    buffer: &mut String,
    count: usize,
) -> Vec<(i64, String, Value)> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let parsed: Vec<(i64, String, Value)> = buffer
            .split("\n\n")
            .filter(|m| m.contains("data: "))
            .filter(|m| buffer.contains(&format!("{m}\n\n")))
            .map(|m| {
                let field = |name: &str| {
                    m.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .unwrap()
                        .to_string()
                };
                (
                    field("id: ").parse().unwrap(),
                    field("event: "),
                    serde_json::from_str(&field("data: ")).unwrap(),
                )
            })
            .collect();
        if parsed.len() >= count {
            return parsed;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "only {} events: {buffer}", parsed.len());
        let chunk = actix_rt::time::timeout(
            left,
            futures_util::future::poll_fn(|cx| body.as_mut().poll_next(cx)),
        )
        .await;
        match chunk {
            Ok(Some(Ok(bytes))) => buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
            Ok(Some(Err(_))) => panic!("the stream failed; {buffer}"),
            Ok(None) => panic!("the stream ended; {buffer}"),
            Err(_) => panic!("no event in time; {buffer}"),
        }
    }
}

async fn the_stream_delivers_in_order_and_resumes_after_the_last_event_seen<S: App>(t: T<S>) {
    let org = t.org.clone();
    let stream = format!("/organization/{org}/events/stream");
    // No credentials: 401, like every route.
    let r = t
        .call(None, actix_web::http::Method::GET, &stream, None)
        .await;
    assert_eq!(r.status, 401);
    let open = |last: Option<i64>, query: &str| {
        let mut req = test::TestRequest::get()
            .uri(&format!("{stream}{query}"))
            .insert_header(("Authorization", format!("Token {}", t.token)));
        if let Some(id) = last {
            req = req.insert_header(("Last-Event-ID", id.to_string()));
        }
        req.to_request()
    };
    let resp = test::call_service(&t.svc, open(None, "")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    let mut body = Box::pin(resp.into_body());
    let mut buffer = String::new();
    // A new subscriber hears what happens from now on.
    let (_, project, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{container}/status")).await;
    let heard = read_events(&mut body, &mut buffer, 8).await;
    let ids: Vec<i64> = heard.iter().map(|(id, _, _)| *id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
    let first = &heard[0].2;
    assert_eq!(first["event_type"], "CREATE");
    assert_eq!(first["target_type"], "CLUSTER");
    let states: Vec<&str> = heard
        .iter()
        .filter(|(_, kind, _)| kind == "deployment")
        .map(|(_, _, d)| d["deployment"]["state"].as_str().unwrap())
        .collect();
    assert!(!states.is_empty(), "{heard:#?}");
    // Everything of the deployment, to its end, in order.
    let all = read_events(&mut body, &mut buffer, ids.len()).await;
    let mut everything = all.clone();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !everything
        .iter()
        .any(|(_, _, d)| d["event_type"] == "DEPLOYED")
    {
        assert!(Instant::now() < deadline, "{everything:#?}");
        everything = read_events(&mut body, &mut buffer, everything.len() + 1).await;
    }
    let done = everything
        .iter()
        .find(|(_, _, d)| d["event_type"] == "DEPLOYED")
        .unwrap();
    assert_eq!(done.1, "deployment");
    assert_eq!(done.2["deployment"]["status"], "SUCCESS");
    assert_eq!(done.2["service_id"], container);
    drop(body);
    // Resuming after the second event: everything after it, nothing before, no gap.
    let resumed = test::call_service(&t.svc, open(Some(ids[1]), "")).await;
    let mut body = Box::pin(resumed.into_body());
    let mut buffer = String::new();
    let again = read_events(&mut body, &mut buffer, everything.len() - 2).await;
    assert_eq!(
        again.iter().map(|(id, _, _)| *id).collect::<Vec<_>>()[..everything.len() - 2],
        everything.iter().map(|(id, _, _)| *id).collect::<Vec<_>>()[2..]
    );
    drop(body);
    // Filtered to one environment of another project: only that environment's events.
    let other_project = t
        .post(
            &format!("/organization/{org}/project"),
            json!({"name": "other"}),
        )
        .await
        .expect(201)
        .id();
    let filtered =
        test::call_service(&t.svc, open(Some(0), &format!("?environment_id={env}"))).await;
    let mut body = Box::pin(filtered.into_body());
    let mut buffer = String::new();
    let only = read_events(&mut body, &mut buffer, 3).await;
    assert!(
        only.iter().all(|(_, _, d)| d["environment_id"] == env),
        "{only:#?}"
    );
    assert!(only.iter().all(|(_, _, d)| d["target_id"] != other_project));
    assert!(only.iter().all(|(_, _, d)| d["project_id"] == project));
    // A malformed Last-Event-ID is refused.
    let bad = test::TestRequest::get()
        .uri(&stream)
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Last-Event-ID", "yesterday"))
        .to_request();
    let r = test::call_service(&t.svc, bad).await;
    assert_eq!(r.status(), 400);
}

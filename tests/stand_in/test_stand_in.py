"""The stand-in from outside, the way docs/testing-with-capstan.md tells a pytest suite to use it:
the built binary started in memory from a fixture, driven by HTTP calls only.

    CAPSTAN_BIN=target/debug/capstan python3 -m pytest -q tests/stand_in
"""

import json
import os
import socket
import subprocess
import time

import pytest
import requests

BIN = os.path.abspath(os.environ.get("CAPSTAN_BIN", "target/debug/capstan"))
WORLD_FILE = os.path.join(os.path.dirname(__file__), "world.yaml")
CONTROLS_TOKEN = "test-controls-token"
CONTROLS = {"Authorization": f"Token {CONTROLS_TOKEN}"}
API = {"Authorization": "Token cap_fixed_test_token"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A capstan serving sqlite::memory: with its controls on; `world` is what --seed made."""

    def __init__(self, seed=WORLD_FILE, **settings):
        port = free_port()
        env = dict(
            os.environ,
            CAPSTAN_CONTROLS="on",
            CAPSTAN_CONTROLS_TOKEN=CONTROLS_TOKEN,
            CAPSTAN_DATABASE_URL="sqlite::memory:",
            CAPSTAN_LISTEN=f"127.0.0.1:{port}",
            CAPSTAN_ENGINE="simulated",
            CAPSTAN_ENGINE_STEP_MS="50",
            CAPSTAN_LOG="warn",
        )
        env.update(settings)
        args = [BIN, "serve"] + (["--seed", seed] if seed else [])
        self.process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
        self.world = json.loads(self.process.stdout.readline()) if seed else None
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                # A debug build's first answer waits for its workers' routers (about a second).
                if requests.get(f"{self.base}/readyz", timeout=10).ok:
                    return
            except requests.ConnectionError:
                time.sleep(0.025)
        raise RuntimeError("capstan did not become ready")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)

    def control(self, method, path, body=None, expect=None):
        r = requests.request(method, f"{self.base}/_capstan{path}", json=body, headers=CONTROLS)
        if expect is not None:
            assert r.status_code == expect, f"{method} {path}: {r.status_code} {r.text}"
        return r

    def api(self, method, path, body=None, token=API):
        return requests.request(method, f"{self.base}{path}", json=body, headers=token)


PG = os.environ.get("CAPSTAN_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
PG_KEY = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="


def psql(sql):
    return subprocess.run(["psql", PG, "-qc", sql], capture_output=True, text=True)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def capstan(request):
    if request.param == "sqlite":
        server = Server()
        dropped = None
    else:
        database = f"capstan_test_stand_in_{os.getpid()}"
        try:
            made = psql(f"CREATE DATABASE {database}")
        except FileNotFoundError:
            made = None
        if made is None or made.returncode != 0:
            if os.environ.get("CI") == "true":
                pytest.fail(f"PostgreSQL is not reachable at {PG}")
            pytest.skip("no PostgreSQL")
        url = f"{PG.rsplit('/', 1)[0]}/{database}"
        server = Server(CAPSTAN_DATABASE_URL=url, CAPSTAN_SECRET_KEY=PG_KEY)
        dropped = f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"
    server.control("POST", "/snapshots", {"name": "fixture"}, expect=201)
    yield server
    server.stop()
    if dropped:
        psql(dropped)


@pytest.fixture(autouse=True)
def clean(request):
    yield
    if "capstan" in request.fixturenames:
        server = request.getfixturevalue("capstan")
        server.control("POST", "/snapshots/fixture/restore", expect=204)
        server.control("DELETE", "/faults", expect=204)


def web_of(world):
    env = world["organizations"][0]["projects"][0]["environments"][0]
    return env["services"][0]["id"]


def settled(server, service, seconds=20):
    r = server.api("GET", f"/container/{service}/status?wait={seconds}")
    assert r.status_code == 200, r.text
    return r.json()


def test_the_seeded_world_answers_with_the_fixture_s_token(capstan):
    org = capstan.world["organizations"][0]
    assert org["tokens"][0] == {"name": "ci", "value": "cap_fixed_test_token"}
    r = capstan.api("GET", f"/organization/{org['id']}/project")
    assert r.status_code == 200
    assert [p["id"] for p in r.json()["results"]] == [org["projects"][0]["id"]]
    web = capstan.api("GET", f"/container/{web_of(capstan.world)}").json()
    assert (web["name"], web["tag"]) == ("web", "1.27")
    reader = {"Authorization": f"Token {org['tokens'][1]['value']}"}
    assert capstan.api("GET", f"/organization/{org['id']}", token=reader).status_code == 200


def test_controls_answer_their_own_token_only(capstan):
    for headers in ({}, API, {"Authorization": "Token not-the-controls-token"}):
        r = requests.post(f"{capstan.base}/_capstan/reset", headers=headers)
        assert r.status_code == 401, r.text
    assert capstan.api("GET", "/organization", token=CONTROLS).status_code == 401


def test_a_held_deployment_resumes_on_release(capstan):
    web = web_of(capstan.world)
    capstan.control("POST", "/engine/hold", {"service_id": web, "state": "DEPLOYING"}, expect=204)
    assert capstan.api("POST", f"/container/{web}/deploy", {}).status_code == 202
    deadline = time.monotonic() + 20
    while capstan.api("GET", f"/container/{web}/status").json()["state"] != "DEPLOYING":
        assert time.monotonic() < deadline, "never reached DEPLOYING"
        time.sleep(0.02)
    time.sleep(0.5)  # ten steps of the engine: still held
    assert capstan.api("GET", f"/container/{web}/status").json()["state"] == "DEPLOYING"
    capstan.control("POST", "/engine/release", {"service_id": web}, expect=204)
    assert settled(capstan, web)["state"] == "DEPLOYED"


def test_a_failed_step_shows_its_message(capstan):
    web = web_of(capstan.world)
    body = {"service_id": web, "step": "DEPLOYMENT", "message": "the disk is full"}
    capstan.control("POST", "/engine/fail", body, expect=204)
    assert capstan.api("POST", f"/container/{web}/deploy", {}).status_code == 202
    assert settled(capstan, web)["state"] == "DEPLOYMENT_ERROR"
    history = capstan.api("GET", f"/container/{web}/deploymentHistory").json()
    assert history["results"][0]["reason"] == "the disk is full"


def test_a_fault_rule_applies_only_where_it_matches(capstan):
    org = capstan.world["organizations"][0]["id"]
    rule = {"method": "GET", "path": "/v1/organization/*", "status": 503, "count": 1}
    made = capstan.control("POST", "/faults", rule, expect=201).json()
    # Another path is untouched; the rule takes the root spelling of the path too, once.
    other = capstan.api("GET", f"/organization/{org}/project")
    assert other.status_code == 200 and "X-Capstan-Fault" not in other.headers
    faulted = capstan.api("GET", f"/organization/{org}")
    assert faulted.status_code == 503
    assert faulted.headers["X-Capstan-Fault"] == made["id"]
    assert faulted.json()["status"] == 503
    assert capstan.api("GET", f"/organization/{org}").status_code == 200
    capstan.control("POST", "/faults", {"path": "/organization", "drop": True}, expect=201)
    with pytest.raises(requests.ConnectionError):
        capstan.api("GET", "/organization")


def test_a_reset_keeps_tokens_and_a_snapshot_brings_the_world_back(capstan):
    org = capstan.world["organizations"][0]["id"]
    capstan.control("POST", "/reset", {"keep_tokens": True}, expect=204)
    assert capstan.api("GET", f"/organization/{org}/project").json()["results"] == []
    made = capstan.api("POST", f"/organization/{org}/project", {"name": "later"})
    assert made.status_code == 201, made.text
    capstan.control("POST", "/snapshots/fixture/restore", expect=204)
    names = [p["name"] for p in capstan.api("GET", f"/organization/{org}/project").json()["results"]]
    assert names == ["shop"]
    assert capstan.api("GET", f"/container/{web_of(capstan.world)}").status_code == 200


def test_the_export_leaves_secret_values_out(capstan):
    r = capstan.control("GET", "/export", expect=200)
    text = r.text
    assert "s3cret" not in text and "hunter2" not in text and "cap_fixed_test_token" not in text
    env = r.json()["organizations"][0]["projects"][0]["environments"][0]
    assert [v["key"] for v in env["variables"]] == ["DB_PASSWORD"]


def test_two_runs_with_the_same_id_seed_give_the_same_ids():
    worlds = []
    for _ in range(2):
        server = Server(CAPSTAN_ID_SEED="7")
        try:
            org = server.world["organizations"][0]["id"]
            made = server.api("POST", f"/organization/{org}/project", {"name": "by-api"}).json()
            worlds.append((server.world, made["id"]))
        finally:
            server.stop()
    # Ids repeat; a token the seed makes is a secret, random whatever the seed.
    made_tokens = [w["organizations"][0]["tokens"].pop(1)["value"] for w, _ in worlds]
    assert made_tokens[0] != made_tokens[1]
    assert worlds[0] == worlds[1]


def test_the_manual_clock_dates_what_is_made():
    server = Server(CAPSTAN_CLOCK="manual")
    try:
        server.control("POST", "/clock", {"now": "2031-03-04T05:06:07Z"}, expect=200)
        server.control("POST", "/clock", {"advance_seconds": 3600}, expect=200)
        org = server.world["organizations"][0]["id"]
        made = server.api("POST", f"/organization/{org}/project", {"name": "dated"}).json()
        assert made["created_at"].startswith("2031-03-04T06:06"), made
    finally:
        server.stop()

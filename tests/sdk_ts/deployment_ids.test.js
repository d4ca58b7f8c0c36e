// The public API's published TypeScript SDK (qovery-typescript-axios) drives the built binary as
// the public CLI and Terraform provider do: an environment's deployment, its services' statuses,
// the queue, a cancel, the histories and the deployment's status all name one request id.
//
//     CAPSTAN_BIN=target/debug/capstan node --test tests/sdk_ts
//
// On SQLite in memory and on a PostgreSQL database of its own (CAPSTAN_TEST_POSTGRES_URL).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import path from "node:path";
import { fileURLToPath } from "node:url";
import sdk from "qovery-typescript-axios";

const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.resolve(process.env.CAPSTAN_BIN ?? "target/debug/capstan");
const WORLD = path.join(here, "..", "stand_in", "world.yaml");
const TOKEN = "cap_fixed_test_token";
const CONTROLS = { Authorization: "Token test-controls-token" };
const PG = process.env.CAPSTAN_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const PG_KEY = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** A capstan serving `database` from the stand-in's world, with its controls on. */
async function serve(database, extra = {}) {
  const port = await freePort();
  const child = spawn(BIN, ["serve", "--seed", WORLD], {
    env: {
      ...process.env,
      CAPSTAN_CONTROLS: "on",
      CAPSTAN_CONTROLS_TOKEN: "test-controls-token",
      CAPSTAN_DATABASE_URL: database,
      CAPSTAN_LISTEN: `127.0.0.1:${port}`,
      CAPSTAN_ENGINE: "simulated",
      CAPSTAN_ENGINE_STEP_MS: "50",
      CAPSTAN_LOG: "warn",
      ...extra,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const [line] = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", (l) => resolve([l]));
    child.once("exit", (code) => reject(new Error(`capstan exited with ${code}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${base}/readyz`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return { child, base, world: JSON.parse(line) };
}

function clients(base) {
  const configuration = new sdk.Configuration({ basePath: base, apiKey: `Token ${TOKEN}` });
  return {
    environmentActions: new sdk.EnvironmentActionsApi(configuration),
    environmentMain: new sdk.EnvironmentMainCallsApi(configuration),
    environmentHistory: new sdk.EnvironmentDeploymentHistoryApi(configuration),
    containerMain: new sdk.ContainerMainCallsApi(configuration),
    containerHistory: new sdk.ContainerDeploymentHistoryApi(configuration),
    queue: new sdk.DeploymentQueueActionsApi(configuration),
    other: new sdk.DefaultApi(configuration),
  };
}

async function control(base, method, path, body) {
  const r = await fetch(`${base}/_capstan${path}`, {
    method,
    headers: { ...CONTROLS, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  assert.ok(r.ok, `${method} ${path}: ${r.status} ${await r.text()}`);
}

async function until(what, read, done, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    assert.ok(Date.now() < deadline, `${what} never came: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function oneRequestIdThroughout(base, world) {
  const api = clients(base);
  const env = world.organizations[0].projects[0].environments[0];
  const web = env.services[0].id;

  // Deployed first, so the environment's deployment below has something running to stop.
  const first = (await api.environmentActions.deployEnvironment(env.id)).data;
  await until(
    "the first deployment's end",
    async () => (await api.other.getDeploymentStatusByDeploymentRequestId(first.deployment_request_id)).data,
    (s) => s.status === "DEPLOYED",
  );

  // Held while it deploys: running, its id on the service, in the queue, canceled by it.
  await control(base, "POST", "/engine/hold", { service_id: web, state: "DEPLOYING" });
  const asked = (await api.environmentActions.redeployEnvironment(env.id)).data;
  const id = asked.deployment_request_id;
  assert.match(id, /^[0-9a-f-]{36}$/);

  const status = await until(
    "the held deployment",
    async () => (await api.containerMain.getContainerStatus(web)).data,
    (s) => s.state === "DEPLOYING",
  );
  assert.equal(status.deployment_request_id, id, "the service shows its environment's request");
  const statuses = (await api.environmentMain.getEnvironmentStatuses(env.id)).data;
  assert.equal(statuses.containers[0].deployment_request_id, id);
  const queue = (await api.environmentMain.listDeploymentRequestByEnvironmentId(env.id)).data;
  assert.equal(queue.results[0].identifier.deployment_request_id, id);
  const serviceQueue = (await api.environmentMain.listDeploymentRequestByServiceId(web)).data;
  assert.equal(serviceQueue.results[0].identifier.deployment_request_id, id);
  const running = (await api.other.getDeploymentStatusByDeploymentRequestId(id)).data;
  assert.deepEqual(
    { ...running, status: undefined },
    { deployment_request_id: id, environment_id: env.id, status: undefined },
  );
  assert.ok(["DEPLOYING", "CANCELING"].includes(running.status), running.status);

  await api.queue.cancelDeploymentRequest(id, {});
  const canceled = await until(
    "the cancel",
    async () => (await api.containerMain.getContainerStatus(web)).data,
    (s) => s.state === "CANCELED",
  );
  assert.equal(canceled.deployment_request_id, id, "the canceled service names the request");

  const ended = (await api.other.getDeploymentStatusByDeploymentRequestId(id)).data;
  assert.deepEqual(ended, { deployment_request_id: id, environment_id: env.id, status: "CANCELED" });
  const envHistory = (await api.environmentHistory.listEnvironmentDeploymentHistoryV2(env.id)).data;
  assert.equal(envHistory.results[0].identifier.execution_id, id);
  const serviceHistory = (await api.containerHistory.listContainerDeploymentHistoryV2(web)).data;
  assert.equal(serviceHistory.results[0].identifier.execution_id, id);
  assert.equal(serviceHistory.results[1].identifier.execution_id, first.deployment_request_id);
}

test("SQLite: one request id from the environment's action to its services, the queue, a cancel and the histories", async () => {
  const server = await serve("sqlite::memory:");
  try {
    await oneRequestIdThroughout(server.base, server.world);
  } finally {
    server.child.kill("SIGTERM");
  }
});

test("PostgreSQL: one request id from the environment's action to its services, the queue, a cancel and the histories", async (t) => {
  const database = `capstan_test_sdk_ts_${process.pid}`;
  const psql = (sql) => execFileSync("psql", [PG, "-qc", sql], { stdio: "pipe" });
  try {
    psql(`CREATE DATABASE ${database}`);
  } catch (e) {
    if (process.env.CI === "true") throw e;
    t.skip(`PostgreSQL unreachable: ${e.message}`);
    return;
  }
  const url = new URL(PG);
  url.pathname = `/${database}`;
  const server = await serve(url.toString(), { CAPSTAN_SECRET_KEY: PG_KEY });
  try {
    await oneRequestIdThroughout(server.base, server.world);
  } finally {
    server.child.kill("SIGTERM");
    await new Promise((r) => server.child.once("exit", r));
    psql(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
});

#!/usr/bin/env bash
# Fuzzes a running capstan against its own /openapi.json with schemathesis (from PyPI): no 5xx and
# no response that breaks the document. Bounded in examples and time. Then, when ../shared is
# there, checks the specification's operations against the public API's reference description.
#   tests/schemathesis.sh [path to the capstan binary]
set -euo pipefail
bin="${1:-target/debug/capstan}"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
repo="$(cd "$(dirname "$0")/.." && pwd)"
source "$repo/.ci/timing.sh"
# Run through the interpreter: a freshly installed console script may not be on PATH (pyenv shims).
python3 -c 'import schemathesis' 2>/dev/null ||
  timed "pip install schemathesis" python3 -m pip install --quiet "schemathesis>=4,<5"
work="$(mktemp -d)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
export CAPSTAN_DATABASE_URL="sqlite://$work/fuzz.db" CAPSTAN_LOG=warn CAPSTAN_ENGINE=simulated CAPSTAN_ENGINE_STEP_MS=20 CAPSTAN_RATE_LIMIT_PER_HOUR=100000000
# The conformance run's webhook receiver listens on 127.0.0.1.
export CAPSTAN_WEBHOOK_ALLOW_PRIVATE=true CAPSTAN_WEBHOOK_RETRY_BASE_MS=200
# So does its fake git provider: named, as an operator names a self-hosted one.
export CAPSTAN_OUTBOUND_ALLOW=127.0.0.1
# Signed-in users (Bearer JWTs) create organizations; the conformance run mints its own.
export CAPSTAN_JWT_HS256_SECRET="conformance-only-secret-$$-$RANDOM$RANDOM"
token=$("$bin" token create --organization-name Fuzz)
"$bin" --listen "127.0.0.1:$port" >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
# On a fresh organization first: the specification's operations against the public reference.
reference="$repo/../shared/reference/public-api-subset.yaml"
public="$repo/../shared/reference/public-api.yaml"
if [ -f "$reference" ]; then
  timed "reference conformance" \
    python3 "$repo/tests/reference_conformance.py" "http://127.0.0.1:$port" "$token" "$reference"
fi
# The deployment operations against the public description, on SQLite here and on PostgreSQL
# (a throwaway database) when one is reachable.
if [ -f "$public" ]; then
  timed "public conformance, SQLite" \
    python3 "$repo/tests/public_conformance.py" "http://127.0.0.1:$port" "$token" "$public"
  pg="${CAPSTAN_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  db="capstan_test_conformance_$$"
  if command -v psql >/dev/null && psql "$pg" -qc "CREATE DATABASE $db" >/dev/null 2>&1; then
    pg_url="${pg%/*}/$db"
    pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    export CAPSTAN_SECRET_KEY="BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
    pg_token=$(CAPSTAN_DATABASE_URL="$pg_url" "$bin" token create --organization-name Conformance)
    CAPSTAN_DATABASE_URL="$pg_url" "$bin" --listen "127.0.0.1:$pg_port" >"$work/pg-server.log" 2>&1 &
    pg_pid=$!
    for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$pg_port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
    status=0
    timed "public conformance, PostgreSQL" \
      python3 "$repo/tests/public_conformance.py" "http://127.0.0.1:$pg_port" "$pg_token" "$public" ||
      status=$?
    kill "$pg_pid" 2>/dev/null; wait "$pg_pid" 2>/dev/null || true
    psql "$pg" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    unset CAPSTAN_SECRET_KEY
    [ "$status" -eq 0 ] || exit "$status"
  elif [ "${CI:-}" = "true" ]; then
    echo "PostgreSQL is not reachable for the conformance run"; exit 1
  fi
fi
# Deleting the organization or revoking the token would leave the rest of the run with 401s only.
# The event stream never ends by design; its own HTTP and black-box tests call it.
# The stand-in's controls are off here (404); their own HTTP and black-box tests call them.
# One worker per process: with two threads, hypothesis's lambda descriptions call ast.parse from
# two threads, which CPython 3.11 can fail with "AST constructor recursion depth mismatch" (a crash
# of the tool, reported as an error on a random operation). Two processes instead, each over half
# of the operations (the services' own paths, and the rest), so both cores work.
fuzz() {
  local part=$1
  shift
  timeout 900 python3 -m schemathesis.cli run "http://127.0.0.1:$port/openapi.json" \
    -H "Authorization: Token $token" \
    --exclude-name "DELETE /organization/{organizationId}" \
    --exclude-name "DELETE /organization/{organizationId}/apiToken/{apiTokenId}" \
    --exclude-name "GET /organization/{organizationId}/events/stream" \
    --exclude-tag controls \
    --checks all --exclude-checks positive_data_acceptance,negative_data_rejection \
    --max-examples "${SCHEMATHESIS_EXAMPLES:-10}" --workers 1 --seed 1 \
    --phases examples,coverage,fuzzing "$@" >"$work/schemathesis-$part.log" 2>&1
}
services='^/(application|container|database|job|helm|terraform)/'
both() {
  fuzz services --include-path-regex "$services" &
  local services_pid=$! status=0 part
  fuzz rest --exclude-path-regex "$services" || status=$?
  wait "$services_pid" || status=$?
  for part in services rest; do
    echo "--- schemathesis, $part"
    cat "$work/schemathesis-$part.log"
  done
  return "$status"
}
timed schemathesis both

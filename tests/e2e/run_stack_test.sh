#!/usr/bin/env bash
# The README's first command, compose/run.sh, on ports of its own: the server, the broker and
# Prometheus come up (the dashboard and Swagger UI are served, Prometheus scrapes the server),
# and a TERM stops the server gracefully and Prometheus with it.
#
# Usage: run_stack_test.sh REPO BUILD_DIR
set -u
REPO="$1" BUILD="$2"
WORK="$(mktemp -d /tmp/feed-run-stack-XXXXXX)"
RUN_PID=""
fail() { echo "FAIL: $*" >&2; tail -20 "$WORK/run.log" >&2; exit 1; }
cleanup() {
  [ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null && sleep 1
  PROMETHEUS_STATE="$WORK/prometheus" "$REPO/compose/prometheus.sh" stop
  rm -rf "$WORK"
}
trap cleanup EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../util/free_port.sh"
P="$(free_port)" H="$(free_port)" M="$(free_port)" Q="$(free_port)"
env BUILD_DIR="$BUILD" FEED_LISTEN="127.0.0.1:$P" FEED_METRICS_LISTEN="127.0.0.1:$M" \
  PROMETHEUS_LISTEN="127.0.0.1:$Q" PROMETHEUS_STATE="$WORK/prometheus" FEED_DATA_DIR="$WORK/data" \
  "$REPO/compose/run.sh" --http-listen "127.0.0.1:$H" --log-rpcs false >"$WORK/run.log" 2>&1 &
RUN_PID=$!
for _ in $(seq 1 600); do
  grep -q "feed-server http listening on" "$WORK/run.log" && break
  kill -0 "$RUN_PID" 2>/dev/null || fail "compose/run.sh exited"
  sleep 0.2
done
grep -q "feed-server http listening on" "$WORK/run.log" || fail "the server did not come up"
grep -q "run: Prometheus at http://127.0.0.1:$Q" "$WORK/run.log" || fail "no Prometheus line"
curl -sf "http://127.0.0.1:$H/dashboard/" | grep -q "<title>Inventory feed</title>" || fail "dashboard"
curl -sf "http://127.0.0.1:$H/swaggerui/" >/dev/null || fail "Swagger UI"
up=""
for _ in $(seq 1 100); do
  up="$(curl -sf --get "http://127.0.0.1:$Q/api/v1/query" --data-urlencode 'query=up{job="feed-server"}' |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')"
  [ "$up" = 1 ] && break
  sleep 0.2
done
[ "$up" = 1 ] || fail "Prometheus does not see the server up"
PROM_PID="$(cat "$WORK/prometheus/prometheus.pid")"

kill -TERM "$RUN_PID"
for _ in $(seq 1 100); do kill -0 "$RUN_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$RUN_PID" 2>/dev/null && fail "compose/run.sh still running 10 s after TERM"
RUN_PID=""
grep -q "\[server\] stopped" "$WORK/run.log" || fail "the server did not stop gracefully"
kill -0 "$PROM_PID" 2>/dev/null && fail "Prometheus still running after the stack stopped"
echo "run_stack_test: ok"

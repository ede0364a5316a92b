#!/usr/bin/env bash
# The local stack's Prometheus (compose/prometheus.sh: Debian's prometheus with the repo's
# configuration and recording rules) scraping a real feed-server under a little load: the
# target is up, the recording rules have values (reservations per second above zero, an error
# ratio, the latency p99), and every query of the Grafana dashboard evaluates without error.
#
# Usage: prometheus_test.sh FEED_SERVER FEEDCTL REPO
set -u
SERVER_BIN="$1" FEEDCTL="$2" REPO="$3"
WORK="$(mktemp -d /tmp/feed-prometheus-XXXXXX)"
export PROMETHEUS_STATE="$WORK/prometheus"
SERVER_PID=""
fail() { echo "FAIL: $*" >&2; tail -5 "$PROMETHEUS_STATE/prometheus.log" >&2 2>/dev/null; exit 1; }
cleanup() {
  "$REPO/compose/prometheus.sh" stop
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../util/free_port.sh"
PORT="$(free_port)" MPORT="$(free_port)" PPORT="$(free_port)"
"$SERVER_BIN" --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$MPORT" --http-listen "" \
  --data-dir "$WORK/data" --log-rpcs false >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done
PROM="$("$REPO/compose/prometheus.sh" start "127.0.0.1:$MPORT" "127.0.0.1:$PPORT")" || fail "prometheus.sh start"

# Load: reservations every 100 ms for a while, and a few that fail (an error ratio above 0).
export FEEDCTL_SERVER="127.0.0.1:$PORT"
"$FEEDCTL" stock adjust prom-sku 100000 --set >/dev/null || fail "adjust"
query() { curl -sf --get "http://$PROM/api/v1/query" --data-urlencode "query=$1"; }
value() { query "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(max((float(x["value"][1]) for x in r), default=-1))'; }
ok=""
for i in $(seq 1 300); do
  "$FEEDCTL" reservation create prom-sku:1 >/dev/null || fail "reserve"
  [ $((i % 20)) = 0 ] && { "$FEEDCTL" reservation create prom-sku:999999 >/dev/null 2>&1; }
  if [ $((i % 10)) = 0 ] && [ "$(value 'feed:reservations:rate1m')" != -1 ] &&
    python3 -c "import sys; sys.exit(0 if float('$(value 'feed:reservations:rate1m')') > 0 else 1)"; then
    ok=1
    break
  fi
  sleep 0.1
done
[ -n "$ok" ] || fail "feed:reservations:rate1m never above 0: $(query 'feed:reservations:rate1m')"
[ "$(value 'up{job="feed-server"}')" = 1.0 ] || fail "the target is not up: $(query up)"
for rule in feed:rpc_calls:rate1m feed:rpc_error_ratio:rate1m feed:rpc_duration_p99_seconds:rate1m; do
  for _ in $(seq 1 30); do [ "$(value "$rule")" != -1 ] && break; sleep 1; done
  [ "$(value "$rule")" != -1 ] || fail "$rule has no value: $(query "$rule")"
done
python3 - "$PROM" "$REPO/compose/grafana/dashboards/inventory-feed.json" <<'PY' || fail "grafana queries"
import json, sys, urllib.parse, urllib.request
prom, path = sys.argv[1], sys.argv[2]
for panel in json.load(open(path))["panels"]:
    for target in panel["targets"]:
        url = f"http://{prom}/api/v1/query?" + urllib.parse.urlencode({"query": target["expr"]})
        reply = json.load(urllib.request.urlopen(url))
        assert reply["status"] == "success", (panel["title"], reply)
print("prometheus: every dashboard query evaluates")
PY
echo "prometheus_test: ok (reservations/s $(value 'feed:reservations:rate1m'), error ratio $(value 'feed:rpc_error_ratio:rate1m'))"

#!/usr/bin/env bash
# Two server builds side by side: the same load against each, in alternating rounds, each
# round on a fresh server and data directory, with the same load generator. Prints the
# median of each figure per build and writes every round's JSON to bench/results/ab/.
#
#   bench/ab.sh OLD_SERVER NEW_SERVER SCENARIO [SCENARIO...]
#
# Scenarios: reserve (unary Reserve, 64 in flight), reserve256 (256 in flight), feed (4 Feed streams x 256 in flight,
# 256 commands per message), watch (10,000 one-SKU watchers, 2,000 changes/s), watch_idle
# (10,000 watchers, 1 change/s), watch_uniform (10,000 watchers, 2,000 changes/s spread
# evenly), reserve_commit (unary Reserve then Commit, both keyed, 64 in flight; adds the
# store operations per pair, from the server's feed_store_operations_total once a checkpoint
# wrote the run's records; with KAFKA_BROKERS set, each server relays to that broker, so the
# relay's cursor writes count too). Env: ROUNDS (3), BENCH_SECONDS (15), BUILD_DIR (build: the
# load generator), PIN=1 (server on core 0, load generator on core 1), OLD_ARGS / NEW_ARGS
# (extra server flags for one side).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 3 ] || { sed -n 2,12p "$0" >&2; exit 1; }
A="$(realpath "$1")" B="$(realpath "$2")"
shift 2
BUILD="${BUILD_DIR:-$REPO/build}"
LOADGEN="$BUILD/bench/loadgen/loadgen"
ROUNDS="${ROUNDS:-3}"
SECS="${BENCH_SECONDS:-15}"
OUT="$REPO/bench/results/ab"
mkdir -p "$OUT"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)"
ADDR="127.0.0.1:$PORT"
METRICS="127.0.0.1:$(free_port)"
WORK="$(mktemp -d /tmp/feed-ab-XXXXXX)"
PID=""
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
SERVER_CPU=() LOAD_CPU=() PLACEMENT=shared
if [ "${PIN:-}" = 1 ]; then SERVER_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1) PLACEMENT=pinned; fi
COMMON=(--skus 10000 --hot-skus 20 --hot-fraction 0.2 --hot-stock 500 --sku-prefix bench-)

wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "ab: nothing listens on $PORT" >&2
  exit 1
}

store_ops() { curl -sf "http://$METRICS/metrics" | grep '^feed_store_operations_total' || true; }

run_one() {  # run_one SERVER LABEL SCENARIO ROUND EXTRA_SERVER_FLAGS
  local server="$1" label="$2" scenario="$3" round="$4" extra="$5" args=()
  case "$scenario" in
    reserve) args=(--scenario reserve --concurrency 64 "${COMMON[@]}") ;;
    reserve256) args=(--scenario reserve --concurrency 256 "${COMMON[@]}") ;;
    feed) args=(--scenario feed --streams 4 --inflight 256 --feed-batch 256 "${COMMON[@]}") ;;
    watch) args=(--scenario watch --subscribers 10000 --watch-filter sku --rate 2000 "${COMMON[@]}") ;;
    watch_idle) args=(--scenario watch --subscribers 10000 --watch-filter sku --rate 1 "${COMMON[@]}") ;;
    # The same watchers with changes spread evenly over the SKUs: about one delivery per
    # change, nothing to conflate, so both builds deliver the same updates.
    watch_uniform) args=(--scenario watch --subscribers 10000 --watch-filter sku --rate 2000
                         --skus 10000 --hot-skus 20 --hot-fraction 0 --hot-stock 500 --sku-prefix bench-) ;;
    reserve_commit) args=(--scenario reserve-commit --concurrency 64 "${COMMON[@]}") ;;
    *) echo "ab: unknown scenario $scenario" >&2; exit 1 ;;
  esac
  local kafka=() warmup=3
  if [ "$scenario" = reserve_commit ] && [ -n "${KAFKA_BROKERS:-}" ]; then
    local topics="ab$RANDOM"
    kafka=(--kafka-brokers "$KAFKA_BROKERS" --kafka-stock-topic "stock.$topics"
      --kafka-order-status-topic "status.$topics" --kafka-receipt-topic "receipts.$topics")
  fi
  rm -rf "$WORK/data"
  : >"$WORK/ops_before.txt"
  : >"$WORK/ops_after.txt"
  "${SERVER_CPU[@]}" "$server" --listen "$ADDR" --metrics-listen "$METRICS" --data-dir "$WORK/data" \
    --log-rpcs false --durability sync --max-open-streams 20000 "${kafka[@]}" $extra \
    >"$WORK/server.log" 2>&1 &
  PID=$!
  wait_port
  sleep 1
  if [ "$scenario" = reserve_commit ]; then
    # The catalogue first, then the counters once they (updated every second) caught up, so
    # that only the pairs' operations are counted.
    "$LOADGEN" --target "$ADDR" --scenario reserve --concurrency 1 --duration-s 0.1 --warmup-s 0 \
      "${COMMON[@]}" >/dev/null 2>"$WORK/load.err" || { cat "$WORK/load.err" >&2; exit 1; }
    sleep 5
    store_ops >"$WORK/ops_before.txt"
    args+=(--seed false)
    warmup=0
  fi
  local rss_before
  rss_before="$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")"
  "${LOAD_CPU[@]}" "$LOADGEN" --target "$ADDR" --json --server-pid "$PID" --duration-s "$SECS" \
    --warmup-s "$warmup" "${args[@]}" >"$OUT/$scenario-$PLACEMENT-$label-$round.json" \
    2>"$WORK/load.err" || { cat "$WORK/load.err" >&2; exit 1; }
  local rss_after
  rss_after="$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")"
  if [ "$scenario" = reserve_commit ]; then
    sleep 7  # the relay drained the run and a checkpoint (every 5 s) wrote its records
    store_ops >"$WORK/ops_after.txt"
  fi
  python3 - "$OUT/$scenario-$PLACEMENT-$label-$round.json" "$rss_before" "$rss_after" \
    "$WORK/ops_before.txt" "$WORK/ops_after.txt" <<'PY'
import json, re, sys
path, before, after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = json.load(open(path))
d["rss_before_kb"], d["rss_after_kb"] = before, after
def ops(file):
    found = {}
    for line in open(file):
        m = re.match(r'feed_store_operations_total\{op="([a-z_]+)"\} ([0-9.e+-]+)', line)
        if m:
            found[m.group(1)] = float(m.group(2))
    return found
start, end = ops(sys.argv[4]), ops(sys.argv[5])
if end and d.get("ok"):
    # Puts and deletes per pair; "commit" counts write groups, not operations.
    d["store_ops_per_pair"] = sum(end[k] - start.get(k, 0) for k in end if k != "commit") / d["ok"]
json.dump(d, open(path, "w"), indent=1)
PY
  kill -TERM "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
}

for scenario in "$@"; do
  for round in $(seq 1 "$ROUNDS"); do
    echo "ab: $scenario round $round" >&2
    run_one "$A" old "$scenario" "$round" "${OLD_ARGS:-}"
    run_one "$B" new "$scenario" "$round" "${NEW_ARGS:-}"
  done
  python3 "$REPO/bench/ab_report.py" "$OUT" "$scenario-$PLACEMENT" "$ROUNDS"
done

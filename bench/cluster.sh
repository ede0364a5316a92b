#!/usr/bin/env bash
# Cluster mode against single-node mode on this machine, side by side in one run (issue 23):
# the same unary Reserve load (closed loop, 64 in flight, 10,000 SKUs, sync durability) on
#   single   a single node (its WAL sync is the acknowledgement point);
#   cluster  one cluster node serving all --cluster-shards shards (each batch appended to the
#            shard log with acks=all and read back before the answer: the acknowledgement
#            point of docs/CLUSTER.md), on the local broker of compose/kafka.sh.
#   cluster-1-round  the same cluster node with one round of appends in flight per shard
#            instead of CLUSTER_ROUNDS (what the pipelined rounds buy).
# and the same two nodes under Feed (1,024 reservations in flight, up to 256 per message):
#   single-feed   4 streams x 256;
#   cluster-feed  one stream per shard (metadata feed-shard, each reserving its shard's SKUs),
#                 1024 / shards in flight on each.
# The difference is the cost of the acknowledgement point. Results: bench/results/cluster/
# c<CONCURRENCY>/ (JSON per run) and a table on stdout. Takes about 90 seconds.
#
# Env: BUILD_DIR (build), BENCH_SECONDS (10), CLUSTER_SHARDS (12), CONCURRENCY (64),
#      CLUSTER_ROUNDS (4: --cluster-rounds-in-flight of the `cluster` run),
#      CLUSTER_RELAY=1 (the cluster node also relays each shard's events to the public topics,
#      one relay per shard; results in c<CONCURRENCY>-relay/).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BUILD="${BUILD_DIR:-$REPO/build}"
SECS="${BENCH_SECONDS:-10}"
SHARDS="${CLUSTER_SHARDS:-12}"
CONCURRENCY="${CONCURRENCY:-64}"
RELAY="${CLUSTER_RELAY:-}"
ROUNDS="${CLUSTER_ROUNDS:-4}"
OUT="$REPO/bench/results/cluster/c$CONCURRENCY${RELAY:+-relay}"
mkdir -p "$OUT"
rm -f "$OUT"/*.json

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j2 --target feed-server loadgen
SERVER="$BUILD/feed-server/feed-server"
LOADGEN="$BUILD/bench/loadgen/loadgen"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)"
ADDR="127.0.0.1:$PORT"
WORK="$(mktemp -d /tmp/feed-cluster-bench-XXXXXX)"
PID=""
. "$REPO/bench/broker.sh"
cleanup() {
  [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true
  stop_broker_if_started
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "cluster bench: $*" >&2; }
ensure_broker

wait_ready() {
  for _ in $(seq 1 600); do
    grep -q "feed-server listening on" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  say "the server did not start: $(tail -3 "$1")"
  exit 1
}
stop() {
  kill -TERM "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
}
load() {  # load NAME [LOADGEN ARGS...] (default: unary Reserve, CONCURRENCY in flight)
  local name="$1"
  shift
  [ $# -gt 0 ] || set -- --scenario reserve --concurrency "$CONCURRENCY"
  say "load: $name"
  "$LOADGEN" --target "$ADDR" --json --server-pid "$PID" "$@" \
    --duration-s "$SECS" --warmup-s 2 --skus 10000 --hot-skus 0 \
    --hot-fraction 0 --sku-prefix "cluster-bench-$name-" \
    --stock 1000000 >"$OUT/$name.json" 2>"$WORK/$name.err" || { cat "$WORK/$name.err" >&2; exit 1; }
}
FEED_SINGLE=(--scenario feed --streams 4 --inflight 256 --feed-batch 256)
FEED_CLUSTER=(--scenario feed --streams "$SHARDS" --inflight $((1024 / SHARDS)) --feed-batch 256
  --feed-shards "$SHARDS")

"$SERVER" --listen "$ADDR" --metrics-listen "" --http-listen "" --data-dir "$WORK/single" \
  --log-rpcs false --durability sync >"$WORK/single.log" 2>&1 &
PID=$!
wait_ready "$WORK/single.log"
load single
load single-feed "${FEED_SINGLE[@]}"
stop

cluster() {  # cluster NAME ROUNDS_IN_FLIGHT [FEED_RUN_NAME]
  "$SERVER" --listen "$ADDR" --metrics-listen "" --data-dir "$WORK/$1" --log-rpcs false \
    --durability sync --cluster-shards "$SHARDS" --cluster-node-id bench-node \
    --cluster-brokers "$BROKERS" --cluster-topic "bench-shard-log-$PORT-$1" \
    --cluster-rounds-in-flight "$2" \
    ${RELAY:+--kafka-brokers "$BROKERS" --kafka-stock-topic "bench-stock-$PORT-$1"} \
    ${RELAY:+--kafka-order-status-topic "bench-status-$PORT-$1" --kafka-receipt-topic "bench-receipts-$PORT-$1"} \
    --cluster-group "bench-$PORT-$1" >"$WORK/$1.log" 2>&1 &
  PID=$!
  wait_ready "$WORK/$1.log"
  # Serving once the group has assigned every shard and each is claimed.
  for _ in $(seq 1 200); do
    [ "$(grep -c 'serving at epoch' "$WORK/$1.log")" -ge "$SHARDS" ] && break
    sleep 0.1
  done
  load "$1"
  [ -n "${3:-}" ] && load "$3" "${FEED_CLUSTER[@]}"
  stop
}
cluster cluster "$ROUNDS" cluster-feed
cluster cluster-1-round 1

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = {n: json.loads((out / f"{n}.json").read_text())
        for n in ("single", "cluster", "cluster-1-round", "single-feed", "cluster-feed")}
print("| run | throughput/s | p50 ms | p99 ms | p99.9 ms | errors | server CPU (cores) |")
print("|---|---|---|---|---|---|---|")
for name, r in rows.items():
    lat = {k: v / 1000 for k, v in r["latency_us"].items()}
    print(f"| {name} | {r['throughput']:,.0f} | {lat['p50']:.2f} | {lat['p99']:.2f} | "
          f"{lat['p999']:.2f} | {r['errors']} | {r['server_cpu_cores']} |")
s, c = rows["single"], rows["cluster"]
ms = lambda r, k: r["latency_us"][k] / 1000
print(f"\ncluster / single throughput: {c['throughput'] / s['throughput']:.2f}; "
      f"p50 {ms(c, 'p50') - ms(s, 'p50'):+.2f} ms, p99 {ms(c, 'p99') - ms(s, 'p99'):+.2f} ms")
one = rows["cluster-1-round"]
print(f"cluster ({sys.argv[2]} rounds in flight) / cluster (1 round): "
      f"{c['throughput'] / one['throughput']:.2f}")
sf, cf = rows["single-feed"], rows["cluster-feed"]
print(f"Feed: cluster / single throughput: {cf['throughput'] / sf['throughput']:.2f}; "
      f"cluster Feed / cluster unary: {cf['throughput'] / c['throughput']:.2f}")
PY

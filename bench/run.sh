#!/usr/bin/env bash
# The whole benchmark suite, side by side in one run on this machine (about 15 minutes on
# 2 cores), then rewrites the tables of bench/RESULTS.md (bench/report.py). Raw results go to
# bench/results/ (JSON and text, committed with RESULTS.md as the evidence).
#
# Everything runs on 127.0.0.1; every load loop stops by itself. The bars (issue 20) are
# measured in two placements, each in the same run: pinned (server on core 0, load generator
# on core 1, taskset) and shared (both on both cores); the other runs are shared.
#
# Env: BUILD_DIR (build), BENCH_SECONDS (10: length of each load run), SKIP_HEAP=1 (no
#      counting-allocator runs), SKIP_MICRO=1 (no Google Benchmark suites), SKIP_PEERS=1 (no
#      Redis and PostgreSQL peers).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BUILD="${BUILD_DIR:-$REPO/build}"
OUT="$REPO/bench/results"
SECS="${BENCH_SECONDS:-10}"
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.txt

compose/install-deps.sh --go-tools
export PATH="$REPO/.cache/gobin:$PATH"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j2 --target feed-server echo-server loadgen core_bench wire_size_bench \
  feed_openapi \
  startup_bench feedctl feed-server-glibc alloc_counter

SERVER="$BUILD/feed-server/feed-server"
ECHO="$BUILD/bench/echo/echo-server"
LOADGEN="$BUILD/bench/loadgen/loadgen"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)"
ADDR="127.0.0.1:$PORT"
METRICS="127.0.0.1:$(free_port)"
HTTP="127.0.0.1:$(free_port)"
WORK="$(mktemp -d /tmp/feed-bench-XXXXXX)"
PID=""
SAMPLER=""
# The placement of the runs that follow (place pinned|shared): command prefixes.
SERVER_CPU=() LOAD_CPU=() PLACE=shared
place() {
  PLACE="$1"
  if [ "$1" = pinned ]; then SERVER_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1); else SERVER_CPU=() LOAD_CPU=(); fi
}
cleanup() {
  [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null || true
  [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "bench: $*" >&2; }

wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  say "nothing listens on $1"
  exit 1
}
stop() {
  [ -n "$PID" ] || return 0
  kill -TERM "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
}
# start_server NAME ARGS...: a fresh data dir per server.
start_server() {
  local name="$1"
  shift
  "${SERVER_CPU[@]}" "$SERVER" --listen "$ADDR" --metrics-listen "$METRICS" --data-dir "$WORK/data-$name" \
    --http-listen "$HTTP" --log-rpcs false "$@" >"$WORK/server-$name.log" 2>&1 &
  PID=$!
  wait_port "$PORT"
}
load() {  # load NAME LOADGEN-ARGS...
  local name="$1"
  shift
  say "load: $name"
  "${LOAD_CPU[@]}" "$LOADGEN" --target "$ADDR" --json --server-pid "$PID" "$@" >"$OUT/$name.json" 2>"$WORK/$name.err" ||
    { cat "$WORK/$name.err" >&2; exit 1; }
}
# Samples the server's RSS (kB) and the outbox depth every 0.5 s into FILE.
sample() {
  local file="$1"
  while kill -0 "$PID" 2>/dev/null; do
    rss="$(awk '/VmRSS/ {print $2}' "/proc/$PID/status" 2>/dev/null || echo 0)"
    depth="$(curl -sf "http://$METRICS/metrics" 2>/dev/null |
      awk -F' ' '/^feed_state\{what="outbox_depth"\}/ {print $2}' || true)"
    echo "$(date +%s.%N) ${rss:-0} ${depth:-0}" >>"$file"
    sleep 0.5
  done
}

# Samples into FILE in the background until stop_sampling.
start_sampling() {
  sample "$1" &
  SAMPLER=$!
}
stop_sampling() {
  kill "$SAMPLER" 2>/dev/null || true
  SAMPLER=""
}
# watch_run NAME RATE: a fresh server, its RSS before, then 10,000 one-SKU WatchStock
# subscribers while stock changes RATE times a second, sampled into NAME_samples.txt.
watch_run() {
  local name="$1" rate="$2"
  start_server "$name" --durability sync --max-open-streams 20000
  sleep 1
  awk '/VmRSS/ {print $2}' "/proc/$PID/status" >"$OUT/${name}_rss_before_kb.txt"
  start_sampling "$OUT/${name}_samples.txt"
  load "${name}_10k" --scenario watch --subscribers 10000 --watch-filter sku --rate "$rate" \
    --duration-s "$SECS" --warmup-s 2 "${COMMON[@]}"
  stop_sampling
  stop
}

# 1. Micro benchmarks (Google Benchmark).
if [ -z "${SKIP_MICRO:-}" ]; then
  say "micro: core_bench"
  "$BUILD/bench/core_bench" --benchmark_format=json --benchmark_out="$OUT/core_bench.json" \
    --benchmark_out_format=json >/dev/null 2>&1
  say "micro: wire_size_bench"
  "$BUILD/bench/wire_size_bench" --benchmark_out="$OUT/wire_size.json" \
    --benchmark_out_format=json >/dev/null 2>&1
  say "startup: 1,000,000 SKUs and 1,000,000 holds, after a clean stop and after a crash"
  "$BUILD/bench/startup_bench" 1000000 1000000 2>/dev/null >"$OUT/startup.txt" || true
  "$BUILD/bench/startup_bench" 1000000 1000000 crash 2>/dev/null >>"$OUT/startup.txt" || true
fi

# Calls per second of a finished run (its JSON), times FACTOR.
throughput_of() {
  python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["throughput"] * float(sys.argv[2])))' \
    "$OUT/$1.json" "$2"
}
start_echo() {  # start_echo API
  "${SERVER_CPU[@]}" "$ECHO" --listen "$ADDR" --api "$1" --threads 1 >"$WORK/echo-$1.log" 2>&1 &
  PID=$!
  wait_port "$PORT"
}
# A catalogue that does not sell out during the bars' runs: every call is a durable
# reservation, as every call to the peers is a durable write.
BARS=(--skus 10000 --hot-skus 0 --hot-fraction 0 --stock 1000000 --sku-prefix bars-)
COMMON=(--skus 10000 --hot-skus 20 --hot-fraction 0.2 --hot-stock 500 --sku-prefix bench-)

# 2. The bars, in each placement: the machine's gRPC floor (a trivial Echo through the same
#    gRPC, both server APIs), our server with sync durability beside it, then the peers.
for placement in pinned shared; do
  place "$placement"
  start_echo callback
  load "echo_closed_$PLACE" --scenario echo --concurrency 64 --duration-s "$SECS" --warmup-s 2
  # Half of echo's closed-loop ceiling: the open-loop rate of this placement.
  HALF="$(throughput_of "echo_closed_$PLACE" 0.5)"
  load "echo_open_$PLACE" --scenario echo --rate "$HALF" --duration-s "$SECS" --warmup-s 2
  stop
  start_echo cq
  load "echo_cq_closed_$PLACE" --scenario echo --concurrency 64 --duration-s "$SECS" --warmup-s 2
  stop
  start_server "bars-$PLACE" --durability sync
  load "reserve_closed_$PLACE" --scenario reserve --concurrency 64 --duration-s "$SECS" --warmup-s 2 \
    "${BARS[@]}"
  load "reserve_open_$PLACE" --scenario reserve --rate "$HALF" --duration-s "$SECS" --warmup-s 2 \
    "${BARS[@]}" --seed false
  # Up to 256 commands per Feed message (FeedRequest.more), results packed the same way.
  load "feed_$PLACE" --scenario feed --streams 4 --inflight 256 --feed-batch 256 --duration-s "$SECS" \
    --warmup-s 2 "${BARS[@]}" --seed false
  # The peers' concurrency: 50 in flight, one command per call or message; then 50 x 16 in
  # flight, 16 commands per Feed message (Redis pipelining 16).
  load "reserve_c50_$PLACE" --scenario reserve --concurrency 50 --duration-s "$SECS" --warmup-s 2 \
    "${BARS[@]}" --seed false
  load "feed_c50_$PLACE" --scenario feed --streams 2 --inflight 25 --duration-s "$SECS" --warmup-s 2 \
    "${BARS[@]}" --seed false
  load "feed_c50x16_$PLACE" --scenario feed --streams 2 --inflight 400 --feed-batch 16 \
    --duration-s "$SECS" --warmup-s 2 "${BARS[@]}" --seed false
  stop
  if [ -z "${SKIP_PEERS:-}" ]; then
    say "peers ($PLACE): Redis appendfsync always and everysec, PostgreSQL"
    peer_env=()
    [ "$PLACE" = pinned ] && peer_env=(SERVER_CPU=0 LOAD_CPU=1)
    mkdir -p "$WORK/peers-$PLACE"
    env "${peer_env[@]}" bench/peers/redis.sh "$WORK/peers-$PLACE" "$SECS" always >&2
    env "${peer_env[@]}" bench/peers/redis.sh "$WORK/peers-$PLACE" "$SECS" everysec >&2
    env "${peer_env[@]}" bench/peers/postgres.sh "$WORK/peers-$PLACE" "$SECS" >&2
    for f in "$WORK/peers-$PLACE"/*.json; do cp "$f" "$OUT/$(basename "$f" .json)_$PLACE.json"; done
  fi
done
place shared

# 3. More of the API, shared placement, sync durability.
start_echo callback
# At 256 in flight, where the server below is CPU-bound too (at 64 part of each Reserve is
# the WAL fsync): the two ratios side by side.
load echo_closed_256 --scenario echo --concurrency 256 --duration-s "$SECS" --warmup-s 2
stop
start_server sync --durability sync
load reserve_closed_256 --scenario reserve --concurrency 256 --duration-s "$SECS" --warmup-s 2 \
  "${COMMON[@]}"
load create_order_closed --scenario create-order --concurrency 64 --duration-s "$SECS" --warmup-s 2 \
  "${COMMON[@]}" --seed false
# One command per message, for comparison.
load feed_single --scenario feed --streams 4 --inflight 256 --duration-s "$SECS" --warmup-s 2 \
  "${COMMON[@]}" --seed false

# ghz (the seed's tool) on the same unary calls, for comparison with ghz-based reports.
grpcurl -plaintext -d '{"sku":"ghz-sku","mode":"ADJUST_MODE_SET","quantity":1000000}' "$ADDR" \
  inventory.v1.InventoryService/AdjustStock >/dev/null
say "ghz: Reserve"
ghz --insecure -c 64 --connections 4 -z "${SECS}s" --format json -o "$OUT/ghz_reserve.json" \
  --call inventory.v1.InventoryService/Reserve \
  -d '{"lines":[{"sku":"ghz-sku","quantity":1}],"idempotency_key":"ghz-{{.RequestNumber}}-{{.TimestampUnixNano}}"}' \
  "$ADDR" >/dev/null 2>&1 || say "ghz Reserve failed"
say "ghz: CreateOrder"
ghz --insecure -c 64 --connections 4 -z "${SECS}s" --format json -o "$OUT/ghz_create_order.json" \
  --call order.v1.OrderService/CreateOrder \
  -d '{"customer_id":"cust-441","item_ids":["ghz-sku"],"total_amount":149.99}' \
  "$ADDR" >/dev/null 2>&1 || say "ghz CreateOrder failed"
stop

# 3b. The same, relaying every event to a local Kafka broker (a JVM on the same 2 cores) at
#     the maximum rate: the outbox depth must stay bounded and drain.
# A broker this script starts is stopped again after its runs (one of another checkout on
# the same port would make the start fail).
compose/kafka.sh status >/dev/null 2>&1 && BROKER_WAS_UP=1 || BROKER_WAS_UP=""
BROKERS="$(compose/kafka.sh start)"
SUFFIX="bench$RANDOM"
KAFKA=(--kafka-brokers "$BROKERS" --kafka-stock-topic "stock.$SUFFIX"
  --kafka-order-status-topic "status.$SUFFIX" --kafka-receipt-topic "receipts.$SUFFIX")
start_server kafka --durability sync "${KAFKA[@]}"
start_sampling "$OUT/sync_samples.txt"
load reserve_closed_kafka --scenario reserve --concurrency 64 --duration-s "$SECS" --warmup-s 2 \
  "${COMMON[@]}"
load feed_kafka --scenario feed --streams 4 --inflight 256 --feed-batch 256 --duration-s "$SECS" \
  --warmup-s 2 "${COMMON[@]}" --seed false
# The relay must have drained what the runs above committed.
sleep 5
curl -sf "http://$METRICS/metrics" | grep '^feed_state' >"$OUT/sync_metrics_end.txt" || true
# Store operations per reservation that is made and then committed, the relay's included:
# the store's counters around a reserve-commit run, once the relay has drained it.
store_ops() { curl -sf "http://$METRICS/metrics" | grep '^feed_store_operations_total' >"$1" || true; }
load reserve_commit_seed --scenario reserve --concurrency 1 --duration-s 0.1 --warmup-s 0 "${BARS[@]}"
sleep 5  # drained, and the counters (updated once a second) caught up
store_ops "$OUT/store_ops_before.txt"
load reserve_commit_kafka --scenario reserve-commit --concurrency 64 --duration-s "$SECS" \
  --warmup-s 0 "${BARS[@]}" --seed false
sleep 7  # the relay drained it and a checkpoint (every 5 s) wrote its records into the tables
store_ops "$OUT/store_ops_after.txt"
stop_sampling
stop
[ -n "$BROKER_WAS_UP" ] || compose/kafka.sh stop >/dev/null 2>&1 || true

# 4. WatchStock fan-out: 10,000 idle subscribers (one change a second), server memory before
#    and during; then 10,000 subscribers receiving 2,000 changes/s on a fresh server.
watch_run watch_idle 1
watch_run watch 2000

# 5. The same unary Reserve with async durability (no fsync): the price of sync.
start_server async --durability async
load reserve_closed_async --scenario reserve --concurrency 64 --duration-s "$SECS" --warmup-s 2 "${COMMON[@]}"
stop

# 6. Heap allocated per unary Reserve on the server: a counting allocator preloaded into the
#    server built without tcmalloc; the difference between a 10 s run and a 0.5 s run, per call.
#    The echo server (glibc malloc too) the same way: gRPC's own per-call floor, side by side.
# heap_count PREFIX BASE_LOAD RUN_LOAD SERVER_FN LOADGEN-ARGS...: SERVER_FN <base|run>
# (which execs the server) under the counting allocator, writing $OUT/PREFIX_<base|run>.txt
# at exit; the load generator at 32 in flight for 0.5 s (BASE_LOAD) and 10 s (RUN_LOAD).
heap_count() {
  local prefix="$1" base_load="$2" run_load="$3" server="$4" n
  shift 4
  for n in base run; do
    (export ALLOC_COUNTER_OUT="$OUT/${prefix}_$n.txt" LD_PRELOAD="$BUILD/bench/liballoc_counter.so"
     "$server" "$n") >"$WORK/$prefix-$n.log" 2>&1 &
    PID=$!
    wait_port "$PORT"
    if [ "$n" = run ]; then
      load "$run_load" --concurrency 32 --duration-s 10 --warmup-s 0 "$@"
    else
      load "$base_load" --concurrency 32 --duration-s 0.5 --warmup-s 0 "$@"
    fi
    stop
  done
}
heap_echo_server() { exec "$ECHO" --listen "$ADDR" --api callback; }
heap_feed_server() {
  exec "$BUILD/bench/feed-server-glibc" --listen "$ADDR" --metrics-listen "" --http-listen "" \
    --data-dir "$WORK/data-heap-$1" --log-rpcs false --durability async
}
if [ -z "${SKIP_HEAP:-}" ]; then
  say "heap: counting allocator"
  heap_count heap_echo heap_echo_base heap_echo heap_echo_server --scenario echo
  heap_count heap heap_base heap_reserve heap_feed_server --scenario reserve "${COMMON[@]}"
fi

# 7. The HTTP gateway beside gRPC: wrk on POST /v1/reservations and GET /healthz, the load
#    generator on Reserve, one server, the same data.
say "http: gateway vs gRPC (bench/http.sh)"
BUILD_DIR="$BUILD" BENCH_SECONDS="$SECS" bench/http.sh >&2

python3 bench/report.py "$OUT" bench/RESULTS.md
say "done: bench/RESULTS.md"

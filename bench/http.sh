#!/usr/bin/env bash
# The HTTP gateway against the gRPC API, side by side on one server and the same data:
# wrk on POST /v1/reservations, the gRPC load generator on Reserve (both 64 connections /
# calls in flight, one unit of a random catalogue SKU each), and wrk on GET /healthz (the
# HTTP ceiling). Writes bench/results/http.json and prints a table; run by bench/run.sh.
#
# Env: BUILD_DIR (build), BENCH_SECONDS (15), PIN=1 (server on core 0, load on core 1),
#      CONNECTIONS (64).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$REPO/build}"
SECS="${BENCH_SECONDS:-15}"
CONN="${CONNECTIONS:-64}"
OUT="$REPO/bench/results"
mkdir -p "$OUT"
SERVER="$BUILD/feed-server/feed-server"
LOADGEN="$BUILD/bench/loadgen/loadgen"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)" HTTP_PORT="$(free_port)"
WORK="$(mktemp -d /tmp/feed-http-bench-XXXXXX)"
PID=""
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
SERVER_CPU=() LOAD_CPU=() PLACEMENT=shared
if [ "${PIN:-}" = 1 ]; then SERVER_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1) PLACEMENT=pinned; fi
say() { echo "http-bench: $*" >&2; }

"${SERVER_CPU[@]}" "$SERVER" --listen "127.0.0.1:$PORT" --metrics-listen "" \
  --http-listen "127.0.0.1:$HTTP_PORT" --data-dir "$WORK/data" --log-rpcs false \
  >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
  grep -q "http listening on" "$WORK/server.log" && break
  sleep 0.1
done
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
HZ="$(getconf CLK_TCK)"

# Seeds the catalogue (10,000 SKUs x 1,000,000) and measures gRPC Reserve.
say "gRPC Reserve ($PLACEMENT, $CONN in flight)"
"${LOAD_CPU[@]}" "$LOADGEN" --target "127.0.0.1:$PORT" --scenario reserve --concurrency "$CONN" \
  --duration-s "$SECS" --warmup-s 3 --skus 10000 --hot-skus 1 --hot-fraction 0 \
  --stock 1000000 --sku-prefix bench- --server-pid "$PID" --json >"$WORK/grpc.json" 2>"$WORK/grpc.txt"

wrk_run() {
  local route="$1" before
  before="$(cpu_ticks)"
  WRK_ROUTE="$route" "${LOAD_CPU[@]}" wrk -t1 -c"$CONN" -d"${SECS}s" --latency \
    -s "$REPO/bench/wrk/routes.lua" "http://127.0.0.1:$HTTP_PORT" >"$WORK/wrk-$route.txt" 2>&1
  echo $(( $(cpu_ticks) - before )) >"$WORK/wrk-$route.cpu"
}
say "wrk POST /v1/reservations"
wrk_run reserve
say "wrk GET /healthz"
wrk_run healthz
kill -TERM "$PID"
wait "$PID" || true
PID=""

python3 - "$WORK" "$HZ" "$PLACEMENT" "$CONN" "$OUT/http.json" <<'PY'
import json, re, sys
work, hz, placement, conn, out = sys.argv[1:]
hz = int(hz)
def wrk(route):
    text = open(f"{work}/wrk-{route}.txt").read()
    m = re.search(r"WRK_RESULT (.*)", text)
    if not m:
        sys.exit(f"http-bench: wrk {route} printed no result:\n{text}")
    r = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    r["per_s"] = r["requests"] / r["seconds"]
    r["cpu_us_per_request"] = int(open(f"{work}/wrk-{route}.cpu").read()) / hz * 1e6 / r["requests"]
    return r
g = json.load(open(f"{work}/grpc.json"))
lat = g["latency_us"]
grpc = {"per_s": g["throughput"], "errors": g["errors"], "p50_ms": lat["p50"] / 1000,
        "p99_ms": lat["p99"] / 1000, "p999_ms": lat["p999"] / 1000,
        "cpu_us_per_request": g["server_cpu_cores"] * g["duration_s"] * 1e6 / max(1, g["results"])}
result = {"placement": placement, "connections": int(conn), "grpc_reserve": grpc,
          "http_reserve": wrk("reserve"), "http_healthz": wrk("healthz")}
result["http_over_grpc"] = result["http_reserve"]["per_s"] / grpc["per_s"]
json.dump(result, open(out, "w"), indent=1)
print(f"| {placement} | gRPC Reserve | {grpc['per_s']:,.0f}/s | {grpc['p50_ms']:.2f} ms | {grpc['p99_ms']:.2f} ms | {grpc['cpu_us_per_request']:.0f} µs |")
for name, key in (("HTTP POST /v1/reservations", "http_reserve"), ("HTTP GET /healthz", "http_healthz")):
    r = result[key]
    print(f"| {placement} | {name} | {r['per_s']:,.0f}/s | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | {r['cpu_us_per_request']:.0f} µs |")
print(f"gateway / gRPC Reserve = {result['http_over_grpc']:.2f}")
PY

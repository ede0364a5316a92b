#!/usr/bin/env bash
# The HTTP gateway's forwarding in cluster mode (issue 23): two nodes sharing CLUSTER_SHARDS
# shards on the local broker; wrk on node B's POST /v1/reservations with SKUs of the shards
# B serves (run on its own core) and then with SKUs of A's shards (forwarded to A over gRPC),
# 64 connections each, same run. The catalogue (2,000 SKUs) is seeded through node B with
# `feedctl stock import`, which sends each shard's lines to its owner. Prints a table; takes
# about 40 seconds.
#
# Env: BUILD_DIR (build), BENCH_SECONDS (10), CLUSTER_SHARDS (4), CONNECTIONS (64).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BUILD="${BUILD_DIR:-$REPO/build}"
SECS="${BENCH_SECONDS:-10}"
SHARDS="${CLUSTER_SHARDS:-4}"
CONN="${CONNECTIONS:-64}"
cmake --build "$BUILD" -j2 --target feed-server feedctl >/dev/null
SERVER="$BUILD/feed-server/feed-server"
FEEDCTL="$BUILD/clients/feedctl/feedctl"
. "$REPO/tests/util/free_port.sh"
WORK="$(mktemp -d /tmp/feed-cluster-http-XXXXXX)"
PIDS=()
. "$REPO/bench/broker.sh"
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  stop_broker_if_started
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "cluster-http bench: $*" >&2; }
ensure_broker
SUFFIX="$$-$RANDOM"

declare -A GRPC HTTP
for node in a b; do
  GRPC[$node]="127.0.0.1:$(free_port)"
  HTTP[$node]="127.0.0.1:$(free_port)"
  "$SERVER" --listen "${GRPC[$node]}" --http-listen "${HTTP[$node]}" --metrics-listen "" \
    --data-dir "$WORK/$node" --log-rpcs false --cluster-shards "$SHARDS" \
    --cluster-node-id "bench-$node" --cluster-brokers "$BROKERS" \
    --cluster-topic "bench-http-shard-log-$SUFFIX" --cluster-group "bench-http-$SUFFIX" \
    >"$WORK/$node.log" 2>&1 &
  PIDS+=($!)
done

# The shards each node serves, once every shard is claimed and both nodes serve some.
for _ in $(seq 1 300); do
  curl -sf "http://${HTTP[b]}/v1/shards" >"$WORK/map.json" 2>/dev/null &&
    python3 - "$WORK/map.json" <<'PY' && break
import json, sys
shards = json.load(open(sys.argv[1])).get("shards", [])
owners = {s.get("nodeId") for s in shards if int(s.get("epoch", "0")) > 0}
sys.exit(0 if len(shards) > 0 and all(int(s.get("epoch", "0")) > 0 for s in shards)
         and owners == {"bench-a", "bench-b"} else 1)
PY
  sleep 0.2
done
sleep 2  # the cooperative rebalance may still move a shard
curl -sf "http://${HTTP[b]}/v1/shards" >"$WORK/map.json"

# The catalogue, split into SKUs of B's shards and of A's (FNV-1a 64 mod the shard count).
python3 - "$WORK" "$SHARDS" <<'PY'
import json, sys
work, shards = sys.argv[1], int(sys.argv[2])
owner = {int(s.get("shard", 0)): s["nodeId"] for s in json.load(open(f"{work}/map.json"))["shards"]}
def shard(sku):
    h = 0xcbf29ce484222325
    for b in sku.encode():
        h = ((h ^ b) * 0x100000001b3) % 2**64
    return h % shards
with open(f"{work}/seed.csv", "w") as seed, open(f"{work}/local.txt", "w") as local, \
        open(f"{work}/forwarded.txt", "w") as forwarded:
    seed.write("sku,location,quantity\n")
    for i in range(2000):
        sku = f"http-bench-{i:06d}"
        seed.write(f"{sku},,1000000\n")
        (local if owner[shard(sku)] == "bench-b" else forwarded).write(sku + "\n")
PY
say "seeding through node B (feedctl stock import)"
"$FEEDCTL" --server "${GRPC[b]}" --json stock import --progress off "$WORK/seed.csv" >"$WORK/seed.json"
grep -q '"failed":0' "$WORK/seed.json" || { say "seeding failed: $(cat "$WORK/seed.json")"; exit 1; }

run() {  # run NAME
  say "wrk POST /v1/reservations on node B: $1 SKUs"
  WRK_SKU_FILE="$WORK/$1.txt" wrk -t1 -c"$CONN" -d"${SECS}s" --latency \
    -s "$REPO/bench/wrk/routes.lua" "http://${HTTP[b]}" >"$WORK/$1.wrk" 2>&1
}
run local
run forwarded

python3 - "$WORK" "$SHARDS" "$CONN" <<'PY'
import re, sys
work, shards, conn = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for name in ("local", "forwarded"):
    text = open(f"{work}/{name}.wrk").read()
    m = re.search(r"WRK_RESULT (.*)", text)
    if not m:
        sys.exit(f"wrk printed no result for {name}: {text}")
    r = dict(kv.split("=") for kv in m.group(1).split())
    rows[name] = {k: float(v) for k, v in r.items()}
print(f"| node B, {shards} shards over 2 nodes, {conn} connections | requests/s | p50 ms | p99 ms | p99.9 ms | errors |")
print("|---|---|---|---|---|---|")
for name, r in rows.items():
    label = "SKUs of B's shards (served on B)" if name == "local" else "SKUs of A's shards (forwarded to A)"
    print(f"| {label} | {r['requests'] / r['seconds']:,.0f} | {r['p50_ms']:.2f} | "
          f"{r['p99_ms']:.2f} | {r['p999_ms']:.2f} | {int(r['errors'])} |")
l, f = rows["local"], rows["forwarded"]
print(f"\nforwarded / local: {(f['requests'] / f['seconds']) / (l['requests'] / l['seconds']):.2f}")
PY

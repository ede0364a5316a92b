#!/usr/bin/env bash
# The benchmark tools still work (a second each, not a measurement): the Redis and PostgreSQL
# peers write their figures, and a reserve-commit load against the server moves the store's
# operation counters by a plausible amount per committed reservation.
#
#   bench_smoke_test.sh FEED_SERVER LOADGEN REPO
set -euo pipefail
SERVER="$1" LOADGEN="$2" REPO="$3"
WORK="$(mktemp -d /tmp/feed-bench-smoke-XXXXXX)"
PID=""
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "bench_smoke: $*" >&2; exit 1; }

"$REPO/bench/peers/redis.sh" "$WORK" 1 always
"$REPO/bench/peers/postgres.sh" "$WORK" 1
python3 - "$WORK" <<'PY'
import json, sys
d = sys.argv[1]
for name in ("peer_redis_always_p1", "peer_redis_always_p16", "peer_postgres"):
    j = json.load(open(f"{d}/{name}.json"))
    assert j["ops_per_s"] > 0, (name, j)
    assert j["p99_ms"] >= j["p50_ms"] > 0, (name, j)
    assert j["durability"], (name, j)
print("bench_smoke: peers ok")
PY

. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)"
MPORT="$(free_port)"
"$SERVER" --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$MPORT" --http-listen "" \
  --data-dir "$WORK/data" --log-rpcs false --checkpoint-interval-ms 200 >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done
ops() { curl -sf "http://127.0.0.1:$MPORT/metrics" | awk '/^feed_store_operations_total\{op="put"\}/ {p=$2} /^feed_store_operations_total\{op="delete"\}/ {d=$2} END {print p + d}'; }
CAT=(--skus 100 --hot-skus 0 --hot-fraction 0 --stock 1000000 --sku-prefix smoke-)
"$LOADGEN" --target "127.0.0.1:$PORT" --scenario reserve --concurrency 1 --duration-s 0.1 \
  --warmup-s 0 "${CAT[@]}" --json >/dev/null 2>"$WORK/seed.err" || { cat "$WORK/seed.err" >&2; fail "seeding failed"; }
sleep 2.5  # the counters follow the store once a second
before="$(ops)"
"$LOADGEN" --target "127.0.0.1:$PORT" --scenario reserve-commit --concurrency 8 --duration-s 1 \
  --warmup-s 0 "${CAT[@]}" --seed false --json >"$WORK/pairs.json" 2>"$WORK/pairs.err" ||
  { cat "$WORK/pairs.err" >&2; fail "reserve-commit failed"; }
sleep 2.5
after="$(ops)"
python3 - "$WORK/pairs.json" "$before" "$after" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
before, after = float(sys.argv[2]), float(sys.argv[3])
pairs = j["ok"]
assert pairs > 100 and j["errors"] == 0, j
per_pair = (after - before) / pairs
# Without a relay: a journal entry per batch (8 callers: a few commands each), and at the
# checkpoints (every 200 ms) the closed reservation (which keeps the Reserve's key), the
# Commit's idempotency record and the levels (100 SKUs) once per checkpoint; the hold, opened
# and closed in between, never.
assert 2 <= per_pair <= 4, per_pair
print(f"bench_smoke: {pairs} reserve-commit pairs, {per_pair:.2f} store operations each")
PY

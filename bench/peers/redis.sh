#!/usr/bin/env bash
# The Redis peer: Debian's redis-server with an append-only file fsynced as asked, the
# reservation as one Lua script (reserve.lua), driven by redis-benchmark with 50 clients,
# one call at a time (-P 1, as a unary client calls) and pipelining 16 (-P 16).
#
#   bench/peers/redis.sh OUT_DIR SECONDS [always|everysec]
#
# Writes OUT_DIR/peer_redis_<fsync>_p1.json and ..._p16.json. SERVER_CPU / LOAD_CPU (core
# numbers) pin the server and redis-benchmark with taskset. Everything on 127.0.0.1.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { sed -n 2,9p "$0" >&2; exit 1; }
OUT="$1" SECS="$2" FSYNC="${3:-always}"
case "$FSYNC" in always | everysec) ;; *) echo "redis.sh: fsync must be always or everysec" >&2; exit 1 ;; esac
SKUS=10000
CLIENTS=50
SRV=() LOAD=() PLACEMENT=shared
if [ -n "${SERVER_CPU:-}" ]; then SRV=(taskset -c "$SERVER_CPU") PLACEMENT=pinned; fi
if [ -n "${LOAD_CPU:-}" ]; then LOAD=(taskset -c "$LOAD_CPU"); fi
. "$HERE/../../tests/util/free_port.sh"
PORT="$(free_port)"
DIR="$(mktemp -d /tmp/peer-redis-XXXXXX)"
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; [ -n "$PID" ] && wait "$PID" 2>/dev/null; rm -rf "$DIR"' EXIT

"${SRV[@]}" redis-server --bind 127.0.0.1 --port "$PORT" --dir "$DIR" --save '' \
  --appendonly yes --appendfsync "$FSYNC" --daemonize no --logfile "$DIR/redis.log" &
PID=$!
cli() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
for _ in $(seq 1 100); do cli ping >/dev/null 2>&1 && break; sleep 0.05; done
cli ping >/dev/null 2>&1 || { echo "redis.sh: redis-server did not start:" >&2; cat "$DIR/redis.log" >&2; exit 1; }

# redis-benchmark's __rand_int__ is a 12-digit number below -r: the same 10,000 keys, each
# with stock enough that nothing sells out during the run.
cli eval "for i = 0, $((SKUS - 1)) do redis.call('SET', string.format('stock:%012d', i), 1000000000) end" 0 >/dev/null
SHA="$(cli script load "$(cat "$HERE/reserve.lua")")"

durability() {
  if [ "$FSYNC" = always ]; then
    echo "nothing acknowledged (the AOF is fsynced before the replies of each event-loop round)"
  else
    echo "up to about 1-2 s of acknowledged writes on power loss or OS crash (AOF fsynced once a second); a process crash alone loses nothing"
  fi
}

# run PIPELINE REQUESTS: redis-benchmark's CSV line for the script.
run() {
  "${LOAD[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -P "$1" -n "$2" -r "$SKUS" \
    --csv EVALSHA "$SHA" 1 'stock:__rand_int__' 1 | tail -1
}
for pipeline in 1 16; do
  # redis-benchmark runs a number of requests, not a time: a short run first sets the count.
  rps="$(run "$pipeline" 20000 | python3 -c 'import csv, sys; print(float(next(csv.reader(sys.stdin))[1]))')"
  n="$(python3 -c "print(max(20000, int($rps * $SECS)))")"
  line="$(run "$pipeline" "$n")"
  python3 - "$line" "$OUT/peer_redis_${FSYNC}_p$pipeline.json" "$FSYNC" "$pipeline" "$CLIENTS" \
    "$PLACEMENT" "$(durability)" "$n" <<'PY'
import csv, json, sys
line, path, fsync, pipeline, clients, placement, durability, n = sys.argv[1:]
# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
f = next(csv.reader([line]))
json.dump({"peer": "redis", "fsync": fsync, "pipeline": int(pipeline), "clients": int(clients),
           "placement": placement, "requests": int(n), "ops_per_s": float(f[1]),
           "p50_ms": float(f[4]), "p99_ms": float(f[6]), "durability": durability},
          open(path, "w"), indent=1)
print(f"redis {fsync} -P {pipeline} ({placement}): {float(f[1]):,.0f}/s, p99 {float(f[6])} ms")
PY
done
# The script did its work: every reservation left a hold.
holds="$(cli get hold:next)"
[ "${holds:-0}" -gt 0 ] || { echo "redis.sh: no hold was written" >&2; exit 1; }

#!/usr/bin/env bash
# Where a server's CPU goes, per call, thread by thread: the same load against one or more
# server builds in alternating rounds (a fresh server and data directory each), the CPU
# time and context switches of every server thread read from /proc over the middle of the
# run and divided by the calls completed meanwhile. Prints the median of each figure per
# build. CPU time per call is steadier than throughput on a shared VM (stolen time is not
# charged to the process).
#
#   bench/cpu_per_call.sh SCENARIO SERVER [SERVER...]
#
# Scenarios: reserve (unary Reserve, 64 in flight), feed (4 Feed streams x 256 in flight,
# 256 per message). Env: ROUNDS (3), PLACEMENT (shared | pinned: server on core 0, load
# generator on core 1), CATALOGUE (bars: 10,000 SKUs that never sell out | hot: 20 hot SKUs
# that do), BUILD_DIR (the load generator's build).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$REPO/tests/util/free_port.sh"
[ $# -ge 2 ] || { sed -n 2,16p "$0" >&2; exit 1; }
SCENARIO="$1"
shift
LOADGEN="${BUILD_DIR:-$REPO/build}/bench/loadgen/loadgen"
ROUNDS="${ROUNDS:-3}"
SERVER_CPU=() LOAD_CPU=()
if [ "${PLACEMENT:-shared}" = pinned ]; then SERVER_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1); fi
case "${CATALOGUE:-bars}" in
  bars) CAT=(--skus 10000 --hot-skus 0 --hot-fraction 0 --stock 1000000 --sku-prefix bars-) ;;
  hot) CAT=(--skus 10000 --hot-skus 20 --hot-fraction 0.2 --hot-stock 500 --sku-prefix bench-) ;;
  *) echo "cpu_per_call: CATALOGUE is bars or hot" >&2; exit 1 ;;
esac
case "$SCENARIO" in
  reserve) ARGS=(--scenario reserve --concurrency 64) ;;
  feed) ARGS=(--scenario feed --streams 4 --inflight 256 --feed-batch 256) ;;
  *) echo "cpu_per_call: unknown scenario $SCENARIO" >&2; exit 1 ;;
esac
WORK="$(mktemp -d /tmp/feed-cpu-XXXXXX)"
PID=""
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
# thread name, context switches, CPU ticks (utime + stime), one line per thread
snapshot() {
  for t in /proc/"$1"/task/*; do
    echo "$(cat "$t/comm" | tr ' ' _) $(awk '/^(voluntary|nonvoluntary)_ctxt/ {s += $2} END {print s}' "$t/status") $(awk '{print $14 + $15}' "$t/stat")"
  done
}
for round in $(seq 1 "$ROUNDS"); do
  for server in "$@"; do
    port="$(free_port)"
    rm -rf "$WORK/data"
    "${SERVER_CPU[@]}" "$server" --listen "127.0.0.1:$port" --metrics-listen "" --http-listen "" \
      --data-dir "$WORK/data" --log-rpcs false >"$WORK/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
    "${LOAD_CPU[@]}" "$LOADGEN" --target "127.0.0.1:$port" "${ARGS[@]}" "${CAT[@]}" --duration-s 10 \
      --warmup-s 1 --json >"$WORK/load.json" 2>/dev/null &
    load=$!
    sleep 4
    snapshot "$PID" >"$WORK/a"
    sleep 4
    snapshot "$PID" >"$WORK/b"
    wait "$load"
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
    python3 - "$WORK" "$server" "$round" >>"$WORK/rounds.jsonl" <<'PY'
import collections, json, sys
work, server, rnd = sys.argv[1:4]
j = json.JSONDecoder().raw_decode(open(f"{work}/load.json").read())[0]
calls = j["ok_throughput"] * 4  # the 4 s between the snapshots
def load(p):
    d = collections.defaultdict(lambda: [0, 0])
    for line in open(p):
        name, cs, ticks = line.split()
        d[name][0] += int(cs); d[name][1] += int(ticks)
    return d
a, b = load(f"{work}/a"), load(f"{work}/b")
threads = {k: {"switches": (b[k][0] - a[k][0]) / calls,
               "cpu_us": (b[k][1] - a[k][1]) * 1e4 / calls} for k in b}
print(json.dumps({"server": server, "round": int(rnd), "ok_per_s": j["ok_throughput"], "threads": threads}))
PY
    echo "cpu_per_call: round $round $(basename "$server") done" >&2
  done
done
python3 - "$WORK/rounds.jsonl" <<'PY'
import json, statistics, sys
rounds = [json.loads(l) for l in open(sys.argv[1])]
servers = list(dict.fromkeys(r["server"] for r in rounds))
names = sorted({t for r in rounds for t, v in r["threads"].items() if v["cpu_us"] >= 0.1})
med = lambda xs: statistics.median(xs) if xs else 0.0
print("| thread | " + " | ".join(f"{s.split('/')[-1]} µs/call (switches)" for s in servers) + " |")
print("|---|" + "---|" * len(servers))
for n in names:
    cells = []
    for s in servers:
        rs = [r["threads"].get(n, {"cpu_us": 0, "switches": 0}) for r in rounds if r["server"] == s]
        cells.append(f"{med([x['cpu_us'] for x in rs]):.1f} ({med([x['switches'] for x in rs]):.2f})")
    print(f"| {n} | " + " | ".join(cells) + " |")
tot = []
for s in servers:
    rs = [r for r in rounds if r["server"] == s]
    tot.append(f"**{med([sum(t['cpu_us'] for t in r['threads'].values()) for r in rs]):.1f}** "
               f"at {med([r['ok_per_s'] for r in rs]):,.0f}/s")
print("| total | " + " | ".join(tot) + " |")
PY

#!/usr/bin/env bash
# End-to-end: the Python client (clients/python) against the real feed-server and the real
# Kafka broker.
#   1. a venv in $REPO/.cache/python-venv (reused), with pinned pytest, confluent-kafka and
#      the package built from the repository (pip install ./clients/python: protoc at build);
#   2. the package's unit tests;
#   3. examples/watch.py on two SKUs while changes are made, with a server restart (SIGTERM,
#      same data dir and port) in the middle: every change sequence of those SKUs exactly
#      once, in order, none missing across the restart;
#   4. follow_order through an order's life to DELIVERED;
#   5. examples/reserve.py started while the server is down, retrying until it is back, then
#      again with the same key: one hold (replayed the second time), the level counts it once;
#   6. examples/kafka_consumer.py on the run's three topics: every event 1..N exactly once;
#   7. cluster mode: three nodes sharing 12 shards, the client given one node's address: every
#      call follows `feed-shard-owner` or the learned shard map to the node serving its shard.
#
# Usage: python_client_test.sh FEED_SERVER_BINARY REPO_DIR
# Needs python3 (3.11+, with venv) and network access to PyPI the first time.
set -u
SERVER_BIN="${1:?usage: python_client_test.sh FEED_SERVER REPO}"
REPO="$(cd "${2:?usage: python_client_test.sh FEED_SERVER REPO}" && pwd)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXAMPLES="$REPO/clients/python/examples"
OPS="$HERE/python_client_ops.py"
START=$SECONDS

# Pinned versions (PyPI). The package's own runtime pins are in clients/python/pyproject.toml.
PIP_PINS=(pytest==9.2.0 confluent-kafka==2.16.1 grpcio==1.85.1 protobuf==7.36.2
  googleapis-common-protos==1.76.0)

WORK="$(mktemp -d /tmp/feed-pyclient-XXXXXX)"
SERVER_PID=""
WATCH_PID=""
RESERVE_PID=""

say() { echo "python_client_test: $*" >&2; }
fail() {
  echo "python_client_test: FAIL: $*" >&2
  for f in "$WORK"/*.err "$WORK/server.log"; do
    [ -s "$f" ] && { echo "---- $(basename "$f") (last lines)" >&2; tail -15 "$f" >&2; }
  done
  exit 1
}
NODE_PIDS=()
cleanup() {
  local pid
  for pid in "$WATCH_PID" "$RESERVE_PID" "$SERVER_PID" "${NODE_PIDS[@]}"; do
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$SERVER_BIN" ] || fail "no server binary at $SERVER_BIN"
command -v python3 >/dev/null || fail "python3 not found"

# --- 1. the venv ---------------------------------------------------------------------------
VENV="$REPO/.cache/python-venv"
PY="$VENV/bin/python"
mkdir -p "$REPO/.cache"
(
  flock 9  # one installer at a time for the shared venv
  if [ ! -x "$PY" ]; then
    say "creating $VENV"
    python3 -m venv "$VENV" || exit 1
  fi
  pins="${PIP_PINS[*]}"
  if [ "$(cat "$VENV/.e2e-pins" 2>/dev/null)" != "$pins" ]; then
    say "installing ${PIP_PINS[*]}"
    "$PY" -m pip install -q --disable-pip-version-check "${PIP_PINS[@]}" || exit 1
    echo "$pins" >"$VENV/.e2e-pins"
  fi
  # Rebuild the package only when its sources or the contracts changed.
  stamp="$(cd "$REPO" && find clients/python/pyproject.toml clients/python/setup.py \
    clients/python/src proto -type f \( -name '*.py' -o -name '*.proto' -o -name '*.toml' -o -name py.typed \) \
    ! -path '*/_gen/*' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' | sort | xargs sha256sum | sha256sum)"
  if [ "$(cat "$VENV/.e2e-feedclient" 2>/dev/null)" != "$stamp" ]; then
    say "installing ./clients/python"
    (cd "$REPO" && "$PY" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
      ./clients/python) || exit 1
    "$PY" -m pip check >/dev/null || { "$PY" -m pip check >&2; exit 1; }
    echo "$stamp" >"$VENV/.e2e-feedclient"
  fi
) 9>"$REPO/.cache/python-venv.lock" || fail "installing into $VENV failed"
# Imported from elsewhere than the source tree: the installed package with its generated code.
(cd "$WORK" && "$PY" -c 'import feedclient.pb') || fail "import feedclient failed in the venv"
say "venv ready ($((SECONDS - START)) s)"

# --- 2. unit tests -----------------------------------------------------------------------------
(cd "$WORK" && "$PY" -m pytest -q -p no:cacheprovider "$REPO/clients/python/tests" >"$WORK/unit.err" 2>&1) ||
  { cat "$WORK/unit.err" >&2; fail "unit tests"; }
say "unit tests: $(tail -1 "$WORK/unit.err")"

# --- the server --------------------------------------------------------------------------------
BROKERS="$("$REPO/compose/kafka.sh" start)" || fail "no Kafka broker (compose/kafka.sh start)"
. "$(dirname "${BASH_SOURCE[0]}")/../util/free_port.sh"
PORT="$(free_port)" || fail "no free port"
ADDR="127.0.0.1:$PORT"
SUFFIX="pyclient$$$RANDOM"
TOPICS="stock.$SUFFIX,status.$SUFFIX,receipts.$SUFFIX"

start_server() {
  local mark
  : >>"$WORK/server.log"
  mark="$(wc -l <"$WORK/server.log")"
  "$SERVER_BIN" --listen "$ADDR" --http-listen "" --metrics-listen "" --data-dir "$WORK/data" \
    --log-rpcs false --event-retention-ms 0 --event-retention-bytes 0 \
    --kafka-brokers "$BROKERS" --kafka-stock-topic "stock.$SUFFIX" \
    --kafka-order-status-topic "status.$SUFFIX" --kafka-receipt-topic "receipts.$SUFFIX" \
    >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    tail -n +"$((mark + 1))" "$WORK/server.log" | grep -q "feed-server listening on $ADDR" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited at start"
    sleep 0.1
  done
  fail "server did not start in 10 s"
}
stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || fail "server not running before its stop"
  for _ in $(seq 1 300); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      wait "$SERVER_PID" || fail "server exited with status $? on SIGTERM"
      SERVER_PID=""
      return 0
    fi
    sleep 0.1
  done
  fail "server still running 30 s after SIGTERM"
}
ops() { "$PY" "$OPS" --server "$ADDR" "$@"; }
# Blocks until file $1 matches regex $2, for at most $3 seconds.
wait_for() {
  local i
  for i in $(seq 1 $(($3 * 10))); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

start_server
for sku in w-1 w-2 w-3 other-1; do
  ops set "$sku" 100 >/dev/null || fail "seeding $sku"
done

# --- 3. watch across restarts -----------------------------------------------------------------
# Restart 1 comes right after a change of a watched SKU: the watch resumes after its highest
# sequence (the server has every change since). Restart 2 comes after a change of another SKU:
# a resume from the highest watched sequence is then older than the restarted server retains
# (OUT_OF_RANGE) and the client falls back to a fresh snapshot (snapshot_on_gap). The server
# runs without event retention here, so that delivered events are trimmed and the fallback is
# what happens (with the default retention the restarted server still has them and resumes).
"$PY" "$EXAMPLES/watch.py" --server "$ADDR" --idle-exit 60 w-1 w-2 >"$WORK/watch.out" 2>"$WORK/watch.err" &
WATCH_PID=$!
wait_for "$WORK/watch.err" "snapshot complete" 15 || fail "watch.py: no snapshot"
: >"$WORK/expected.seq"
changes() { # rounds
  ops changes --watched w-1,w-2 --other other-1 --rounds "$1" >"$WORK/changes.out" || fail "changes"
  sed -n 's/^watched_seq=//p' "$WORK/changes.out" >>"$WORK/expected.seq"
}
watched_change() {
  local out
  out="$(ops add w-2 1)" || fail "adjust w-2"
  echo "${out#seq=}" >>"$WORK/expected.seq"
}
wait_watched() { # until the watch shows the last expected sequence
  local last
  last="$(tail -1 "$WORK/expected.seq")"
  wait_for "$WORK/watch.out" "^seq=$last " 20 || fail "watch.py never showed seq=$last ($1)"
}

changes 4
watched_change
wait_watched "before restart 1"
stop_server
start_server
# Right after the restart, while the watch is still reconnecting (it gets these from the
# server's retained changes), then more once it is connected.
changes 3
sleep 0.3
changes 2
wait_watched "after restart 1"
[ "$(grep -c 'kind=snapshot$' "$WORK/watch.out")" = 2 ] ||
  fail "restart 1: the watch should have resumed without a new snapshot: $(cat "$WORK/watch.out")"

ops add other-1 1 >/dev/null || fail "adjust other-1"
stop_server
start_server
# The next changes must come after the fresh snapshot's cut to show as changes.
for _ in $(seq 1 150); do
  [ "$(grep -c 'snapshot complete' "$WORK/watch.err")" -ge 2 ] && break
  sleep 0.1
done
[ "$(grep -c 'snapshot complete' "$WORK/watch.err")" = 2 ] || fail "restart 2: no fresh snapshot: $(cat "$WORK/watch.err")"
changes 2
wait_watched "after restart 2"
sleep 0.5 # room for a duplicate to show up, if the client let one through
kill -TERM "$WATCH_PID"
wait "$WATCH_PID" || fail "watch.py exited with status $? on SIGTERM"
WATCH_PID=""

grep -vE '^seq=[0-9]+ sku=w-[12] location=[^ ]+ on_hand=-?[0-9]+ reserved=-?[0-9]+ available=-?[0-9]+ kind=(snapshot|change)( conflated=true)?$' \
  "$WORK/watch.out" >"$WORK/badlines" && fail "watch.py: malformed lines: $(head -3 "$WORK/badlines")"
[ "$(grep -c 'kind=snapshot$' "$WORK/watch.out")" = 4 ] || fail "watch.py: expected 2 snapshots of 2 rows"
# Every change of the watched SKUs after the first snapshot, exactly once, in order.
grep 'kind=change' "$WORK/watch.out" | sed 's/^seq=\([0-9]*\) .*/\1/' >"$WORK/got.seq"
diff "$WORK/expected.seq" "$WORK/got.seq" >"$WORK/seq.diff" ||
  fail "watch.py's change sequences differ from the changes made (< made, > shown): $(cat "$WORK/seq.diff")"
# Sequences never go back, and the fresh snapshot shows exactly the levels the changes led to
# (nothing was lost while disconnected).
awk '{ split($1, a, "="); seq = a[2] + 0; split($2, b, "="); sku = b[2]; vals = $4 " " $5 " " $6
       if (seq < prev) { print "sequence goes back at: " $0; bad = 1 }
       if ($7 == "kind=snapshot" && (sku in last) && last[sku] != vals) {
         print "snapshot row " $0 " differs from the last change (" last[sku] ")"; bad = 1 }
       last[sku] = vals; prev = seq }
     END { exit bad }' "$WORK/watch.out" >"$WORK/order.check" || fail "watch.py: $(cat "$WORK/order.check")"
grep -Eq 'reconnects=[1-9]' "$WORK/watch.err" || fail "watch.py did not reconnect: $(tail -1 "$WORK/watch.err")"
# The last line of each SKU is its current level.
for sku in w-1 w-2; do
  want="$(ops level "$sku")" || fail "level $sku"
  got="$(grep " sku=$sku " "$WORK/watch.out" | tail -1 | sed 's/.* \(on_hand=.* available=[-0-9]*\).*/\1/')"
  [ "$got" = "$want" ] || fail "watch.py's last $sku level '$got' differs from GetStock '$want'"
done
say "watch: $(wc -l <"$WORK/got.seq") changes across 2 restarts (a resume, a fresh snapshot), each once, in order ($((SECONDS - START)) s)"

# --- 4. follow_order ---------------------------------------------------------------------------
ops order-flow other-1 >"$WORK/order.out" 2>"$WORK/order.err" || fail "order flow"
grep -qx 'statuses=CONFIRMED,PAID,PACKING,DISPATCHED,DELIVERED' "$WORK/order.out" ||
  fail "follow_order saw: $(cat "$WORK/order.out")"

# --- 5. reserve across a restart ---------------------------------------------------------------
KEY="e2e-retry-$SUFFIX"
stop_server
"$PY" "$EXAMPLES/reserve.py" --server "$ADDR" --key "$KEY" --attempts 40 w-3:2 \
  >"$WORK/reserve.out" 2>"$WORK/reserve.err" &
RESERVE_PID=$!
wait_for "$WORK/reserve.err" "attempt 2 failed \(UNAVAILABLE" 15 || fail "reserve.py did not retry while the server was down"
start_server
wait "$RESERVE_PID" || fail "reserve.py exited with status $?"
RESERVE_PID=""
grep -q "with key $KEY" "$WORK/reserve.err" || fail "the retries did not carry key $KEY: $(cat "$WORK/reserve.err")"
grep -q "replayed=false .* key=$KEY" "$WORK/reserve.out" || fail "first reserve: $(cat "$WORK/reserve.out")"
RSV="$(sed -n 's/^reservation=\([^ ]*\) .*/\1/p' "$WORK/reserve.out")"
stop_server
start_server
"$PY" "$EXAMPLES/reserve.py" --server "$ADDR" --key "$KEY" w-3:2 >"$WORK/reserve2.out" 2>"$WORK/reserve2.err" ||
  fail "second reserve.py with the same key"
grep -q "^reservation=$RSV .*replayed=true" "$WORK/reserve2.out" ||
  fail "same key after a restart should replay $RSV: $(cat "$WORK/reserve2.out")"
[ "$(ops level w-3)" = "on_hand=100 reserved=2 available=98" ] ||
  fail "w-3 should hold 2 once: $(ops level w-3)"
say "reserve: $(grep -c 'failed' "$WORK/reserve.err") retries across a restart, applied once ($((SECONDS - START)) s)"

# --- 6. Kafka ----------------------------------------------------------------------------------
N="$(ops set other-1 7 | sed -n 's/^seq=//p')"
[ -n "$N" ] || fail "final change"
"$PY" "$EXAMPLES/kafka_consumer.py" --brokers "$BROKERS" --topics "$TOPICS" --expect "$N" --timeout 60 \
  >"$WORK/kafka.out" 2>"$WORK/kafka.err" || fail "kafka_consumer.py (expected sequences 1..$N)"
sed -n 's/^seq=\([0-9]*\) .*/\1/p' "$WORK/kafka.out" | sort -n >"$WORK/kafka.seq"
seq 1 "$N" >"$WORK/all.seq"
diff "$WORK/all.seq" "$WORK/kafka.seq" >"$WORK/kafka.diff" ||
  fail "kafka_consumer.py sequences are not exactly 1..$N: $(head -20 "$WORK/kafka.diff")"
sed -n 's/.* id=\([^ ]*\) .*/\1/p' "$WORK/kafka.out" | sort | uniq -d >"$WORK/dup.ids"
[ -s "$WORK/dup.ids" ] && fail "event ids printed twice: $(head "$WORK/dup.ids")"
# event_id is "<store id>-<sequence>": one store, and each id matches its sequence.
awk '{ split($1, s, "="); split($2, i, "="); n = split(i[2], p, "-");
       if (p[n] != s[2]) bad++; store[substr(i[2], 1, length(i[2]) - length(p[n]) - 1)] = 1 }
     END { c = 0; for (k in store) c++; exit (bad > 0 || c != 1) }' "$WORK/kafka.out" ||
  fail "event ids do not match their sequences or name more than one store"
say "kafka: $N events each once ($(tail -1 "$WORK/kafka.err" | sed 's/^kafka_consumer: //'))"

stop_server

# --- 7. cluster mode ---------------------------------------------------------------------------
NODES=()
for i in 0 1 2; do
  NODE_PORT="$(free_port)" || fail "no free port"
  "$SERVER_BIN" --listen "127.0.0.1:$NODE_PORT" --metrics-listen "" --data-dir "$WORK/node-$i" \
    --log-rpcs false --cluster-shards 12 --cluster-node-id "py-$i" --cluster-brokers "$BROKERS" \
    --cluster-topic "shard-log.$SUFFIX" --cluster-group "cluster.$SUFFIX" >"$WORK/node-$i.err" 2>&1 &
  NODE_PIDS+=("$!")
  NODES+=("127.0.0.1:$NODE_PORT")
done
for _ in $(seq 1 300); do
  [ "$(cat "$WORK"/node-*.err | grep -c 'serving at epoch')" -ge 12 ] && break
  sleep 0.1
done
OUT="$("$PY" "$OPS" --server "${NODES[0]}" cluster --skus 40 2>"$WORK/cluster.err")" ||
  fail "cluster ops through ${NODES[0]}: $(cat "$WORK/cluster.err")"
case "$OUT" in
  "shards="*" reserved=40 committed=40 streams=12") ;;
  *) fail "cluster ops: $OUT" ;;
esac
[ "${OUT%% *}" != "shards=1" ] || fail "every call answered by one shard: $OUT"
say "cluster: $OUT through one node's address"
echo "python_client_test: ok ($((SECONDS - START)) s)"

#!/usr/bin/env bash
# End-to-end: the Go client library (clients/go) against the real feed-server and Kafka.
#   1. generates the Go code (clients/go/generate.sh), builds the examples, runs go test;
#   2. starts the server with Kafka topics of its own, watches some SKUs with the `watch`
#      example, changes stock, restarts the server (SIGTERM, same data dir and port) in the
#      middle of the watch, changes more: the watch prints every change after its snapshot
#      exactly once, in order, with no gap, and the same levels the replies gave;
#   3. `reserve` retried across a server restart (UNAVAILABLE) and across a stalled server
#      (attempt timeout): held once, and the same key again is a replay;
#   4. an order created (the same key again: a replay), paid and advanced to DELIVERED while
#      the `order follow` example follows it across a restart: each status once, in order;
#   5. `kafka-consumer` reads the run's three topics: every event id once, sequences 1..N,
#      the replies' stock changes and the order's status events and receipt among them;
#   6. a server with TLS and tokens: the examples with a CA file and a token (or a token
#      file); a wrong token is UNAUTHENTICATED, a token without TLS is refused by Dial;
#   7. cluster mode: three nodes sharing 12 shards, the examples given one node's address:
#      every call reaches the node serving its shard (the client follows feed-shard-owner).
#
# Usage: go_client_test.sh FEED_SERVER REPO
# Needs Go, protoc and openssl (compose/dev-certs.sh); Go modules come from the module proxy, the protoc plugins go into
# REPO/.cache/gobin. Kafka: the broker of compose/kafka.sh (start is run: idempotent), or
# the one named by KAFKA_BROKERS when set.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 FEED_SERVER REPO" >&2
  exit 2
fi
SERVER_BIN="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
REPO="$(cd "$2" && pwd)"
GO_DIR="$REPO/clients/go"
WORK="$(mktemp -d /tmp/go-client-test-XXXXXX)"
BIN="$WORK/bin"
T0=$SECONDS
SERVER_PID="" WATCH_PID="" RESERVE_PID="" FOLLOW_PID="" NODE_PIDS=""

say() { echo "go_client_test: $* (+$((SECONDS - T0)) s)" >&2; }
FAILED=""
fail() {
  FAILED=1
  echo "go_client_test: FAIL: $*" >&2
  local f
  for f in "$WORK"/server.log "$WORK"/*.err "$WORK"/*.out; do
    [ -s "$f" ] || continue
    echo "---- last lines of $(basename "$f") ----" >&2
    tail -n 15 "$f" >&2
  done
  exit 1
}
cleanup() {
  local p
  for p in $FOLLOW_PID $RESERVE_PID $WATCH_PID $SERVER_PID $NODE_PIDS; do
    kill -CONT "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
  if [ -n "$FAILED" ] && [ -n "${GO_CLIENT_TEST_KEEP:-}" ]; then
    echo "go_client_test: outputs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

[ -x "$SERVER_BIN" ] || fail "feed-server binary '$1' is not executable"
command -v go >/dev/null || fail "go not found"

. "$(dirname "${BASH_SOURCE[0]}")/../util/free_port.sh"

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.1 s until it succeeds.
wait_for() {
  local secs="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${secs} s waiting for $what"
    sleep 0.1
  done
}

exited() { ! kill -0 "$1" 2>/dev/null; }

# --- 1. generate, build, unit tests ------------------------------------------------------
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
say "generating the Go code"
"$GO_DIR/generate.sh" >"$WORK/generate.log" 2>&1 || { cat "$WORK/generate.log" >&2; fail "generate.sh failed"; }
say "building the examples"
(cd "$GO_DIR" && go build -p 2 -o "$BIN/" ./examples/...) >"$WORK/build.log" 2>&1 ||
  { cat "$WORK/build.log" >&2; fail "go build failed"; }
for b in watch reserve adjust order kafka-consumer; do
  [ -x "$BIN/$b" ] || fail "example $b was not built"
done
say "go test ./..."
(cd "$GO_DIR" && go test -p 2 -count=1 ./...) >"$WORK/unit.log" 2>&1 ||
  { cat "$WORK/unit.log" >&2; fail "go test ./... failed"; }
grep -E '^(ok|FAIL|---)' "$WORK/unit.log" >&2

# --- 2. server with its own topics, a watch across a restart ---------------------------
if [ -n "${KAFKA_BROKERS:-}" ]; then
  BROKER="$KAFKA_BROKERS" # a broker of the caller's
else
  BROKER="$("$REPO/compose/kafka.sh" start 2>"$WORK/kafka.err")" || fail "no Kafka broker (compose/kafka.sh start failed)"
fi
RUN="go-client-test-$$-$RANDOM"
TOPICS="$RUN.stock,$RUN.status,$RUN.receipt"
PORT="$(free_port)" || fail "no free port"
export FEED_SERVER="127.0.0.1:$PORT"
STARTS=0

start_server() {
  STARTS=$((STARTS + 1))
  "$SERVER_BIN" --listen "$FEED_SERVER" --http-listen "" --metrics-listen "" \
    --data-dir "$WORK/data" --log-rpcs false --stream-conflate-after-ms 0 \
    --kafka-brokers "$BROKER" --kafka-stock-topic "$RUN.stock" \
    --kafka-order-status-topic "$RUN.status" --kafka-receipt-topic "$RUN.receipt" \
    >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  local deadline=$((SECONDS + 20))
  while (($(grep -c "feed-server listening on" "$WORK/server.log") < STARTS)); do
    kill -0 "$SERVER_PID" 2>/dev/null || fail "feed-server exited at start"
    ((SECONDS < deadline)) || fail "feed-server did not start in 20 s"
    sleep 0.05
  done
}
stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || fail "feed-server is not running"
  local deadline=$((SECONDS + 20))
  while kill -0 "$SERVER_PID" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "feed-server did not stop within 20 s of SIGTERM"
    sleep 0.05
  done
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
}

# Every stock change a reply reported, as "seq=N sku=S location=L on_hand=H reserved=R
# available=A" (adjust lines, and reserve's level lines), appended to $WORK/changes.
record_adjust() { sed -E 's/ replayed=.*$//' "$1" >>"$WORK/changes"; }
record_reserve() { sed -n -E 's/^level (seq=.*)$/\1/p' "$1" >>"$WORK/changes"; }
adjust() { # adjust NAME ARGS...: runs the adjust example, records its changes
  local name="$1"
  shift
  "$BIN/adjust" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || fail "adjust $* failed: $(cat "$WORK/$name.err")"
  record_adjust "$WORK/$name.out"
}
reserve() { # reserve NAME ARGS...: runs the reserve example, records its changes
  local name="$1"
  shift
  "$BIN/reserve" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || fail "reserve $* failed: $(cat "$WORK/$name.err")"
  record_reserve "$WORK/$name.out"
}
: >"$WORK/changes"

say "starting feed-server on $FEED_SERVER (topics $TOPICS)"
start_server
adjust setup --set w1=100 w2=100 w3@wh-2=100 other=100

# Watched: w1, w2 and w3 (every location, wh-3 appears only in phase 2). `other` changes
# too and must not show. Each argument is one change (a reserve changes each line's level).
P1_ADJUST=(w1=-1 other=5 w2=3 w3@wh-2=-2 w1=4 other=-1 w2=-3 w3@wh-2=7)
P1_RESERVE=(w1:2 w2:1 other:1 w3@wh-2:3)
P2_ADJUST=(w2=2 other=3 w1=-5 w3@wh-2=1 w3@wh-3=9 other=2 w1=1)
P2_RESERVE=(w2:4 w3@wh-3:2 other:2 w1:1)
P2_ADJUST_MORE=(w3@wh-2=-1 w2=-1)
WATCHED_CHANGES=0
for a in "${P1_ADJUST[@]}" "${P1_RESERVE[@]}" "${P2_ADJUST[@]}" "${P2_RESERVE[@]}" "${P2_ADJUST_MORE[@]}"; do
  [[ "$a" == w* ]] && WATCHED_CHANGES=$((WATCHED_CHANGES + 1))
done
"$BIN/watch" --sku w1,w2 --sku w3 --max-updates "$WATCHED_CHANGES" --idle-exit 30s \
  >"$WORK/watch.out" 2>"$WORK/watch.err" &
WATCH_PID=$!
wait_for 20 "the watch's snapshot" grep -qs "snapshot complete" "$WORK/watch.err"
[ "$(grep -c 'kind=snapshot' "$WORK/watch.out")" = 3 ] || fail "snapshot rows: $(cat "$WORK/watch.out")"

say "phase 1: changes before the restart"
adjust p1a "${P1_ADJUST[@]}"
reserve p1r --ttl 10m "${P1_RESERVE[@]}"
LAST_P1="$(sed -n -E 's/^seq=([0-9]+) sku=w.*/\1/p' "$WORK/changes" | sort -n | tail -1)"
watch_has() { grep -qs "^seq=$1 " "$WORK/watch.out"; }
wait_for 20 "the watch to print seq=$LAST_P1" watch_has "$LAST_P1"

say "restarting feed-server in the middle of the watch"
stop_server
sleep 0.5 # the watch tries and fails to reconnect meanwhile
start_server

say "phase 2: changes after the restart"
adjust p2a "${P2_ADJUST[@]}"
reserve p2r --ttl 10m "${P2_RESERVE[@]}"
adjust p2b "${P2_ADJUST_MORE[@]}"
watch_finished() { # the watch has exited; a second snapshot (no resume) fails at once
  if (($(grep -c "snapshot complete" "$WORK/watch.err") > 1)); then
    fail "the watch took a new snapshot instead of resuming: $(cat "$WORK/watch.err")"
  fi
  ! kill -0 "$WATCH_PID" 2>/dev/null
}
wait_for 30 "the watch to exit after $WATCHED_CHANGES changes" watch_finished
wait "$WATCH_PID"
WATCH_RC=$?
WATCH_PID=""
[ "$WATCH_RC" = 0 ] || fail "watch exited $WATCH_RC: $(cat "$WORK/watch.err")"

CUT="$(sed -n -E 's/.*snapshot complete at seq=([0-9]+).*/\1/p' "$WORK/watch.err")"
[ "$(echo "$CUT" | wc -l)" = 1 ] || fail "the watch took more than one snapshot (it should resume): $(cat "$WORK/watch.err")"
grep -q "reconnecting" "$WORK/watch.err" || fail "the watch never reconnected: the restart was not crossed"
grep "reconnecting" "$WORK/watch.err" | grep -q "resume after seq=$LAST_P1" ||
  fail "the watch did not resume after seq=$LAST_P1: $(grep reconnecting "$WORK/watch.err")"
# What the watch printed after its snapshot, and what the replies said about the watched
# SKUs after the cut: the same lines, in sequence order, each once.
grep 'kind=change' "$WORK/watch.out" | sed -E 's/ kind=change$//' >"$WORK/watch.changes"
grep -E '^seq=[0-9]+ sku=w[0-9] ' "$WORK/changes" | sort -t= -k2 -n |
  awk -v cut="$CUT" '{ split($1, a, "="); if (a[2] + 0 > cut + 0) print }' >"$WORK/expected.changes"
[ "$(wc -l <"$WORK/expected.changes")" = "$WATCHED_CHANGES" ] ||
  fail "expected $WATCHED_CHANGES watched changes, the replies show $(wc -l <"$WORK/expected.changes")"
sed -E 's/^seq=([0-9]+) .*/\1/' "$WORK/watch.changes" >"$WORK/watch.seqs"
sort -n -u "$WORK/watch.seqs" | cmp -s - "$WORK/watch.seqs" ||
  fail "watch sequences not strictly increasing: $(tr '\n' ' ' <"$WORK/watch.seqs")"
if ! diff "$WORK/expected.changes" "$WORK/watch.changes" >"$WORK/watch.diff"; then
  cat "$WORK/watch.diff" >&2
  fail "the watch's changes differ from the replies' (< replies, > watch)"
fi
say "watch: $WATCHED_CHANGES changes after the snapshot at seq=$CUT, once each, in order, across the restart"

# --- 3. reserve retried across a restart and across a stalled server --------------------
reserved_of() { # reserved_of SKU LOCATION [FLAGS...]: the level's reserved, read by a snapshot
  "$BIN/watch" --sku "$1" --location "$2" --snapshot-only "${@:3}" 2>/dev/null |
    sed -n -E 's/.* reserved=([0-9-]+) .*/\1/p'
}
field() { sed -n -E "1s/.*$1=([^ ]+).*/\1/p" "$2"; }

BEFORE="$(reserved_of w1 default)"
[ -n "$BEFORE" ] || fail "cannot read w1's level"
say "reserve across a restart (server down when it starts)"
stop_server
"$BIN/reserve" --key "$RUN-k1" --ttl 10m --attempts 40 --backoff 100ms --max-backoff 400ms w1:3 \
  >"$WORK/r1.out" 2>"$WORK/r1.err" &
RESERVE_PID=$!
wait_for 10 "reserve's first failed attempt" grep -qs "attempt 1 failed" "$WORK/r1.err"
sleep 0.5
start_server
wait_for 30 "reserve to finish" exited "$RESERVE_PID"
wait "$RESERVE_PID" || fail "reserve across the restart failed: $(cat "$WORK/r1.err")"
RESERVE_PID=""
record_reserve "$WORK/r1.out"
[ "$(field attempts "$WORK/r1.out")" -ge 2 ] || fail "reserve did not retry: $(cat "$WORK/r1.out")"
grep -q "with key $RUN-k1" "$WORK/r1.err" || fail "the retries did not use the key: $(cat "$WORK/r1.err")"
"$BIN/reserve" --key "$RUN-k1" --ttl 10m w1:3 >"$WORK/r1b.out" 2>"$WORK/r1b.err" || fail "reserve again: $(cat "$WORK/r1b.err")"
[ "$(field replayed "$WORK/r1b.out")" = true ] || fail "the same key again was not a replay: $(cat "$WORK/r1b.out")"
[ -n "$(field reservation "$WORK/r1.out")" ] || fail "no reservation id: $(cat "$WORK/r1.out")"
[ "$(field reservation "$WORK/r1b.out")" = "$(field reservation "$WORK/r1.out")" ] ||
  fail "replay names another reservation: $(cat "$WORK/r1.out" "$WORK/r1b.out")"
AFTER="$(reserved_of w1 default)"
[ "$AFTER" = $((BEFORE + 3)) ] || fail "w1 reserved went $BEFORE -> $AFTER, want +3 (applied once)"

say "reserve across a stalled server (SIGSTOP: the attempts time out)"
BEFORE="$(reserved_of w2 default)"
kill -STOP "$SERVER_PID"
"$BIN/reserve" --key "$RUN-k2" --ttl 10m --attempts 40 --attempt-timeout 300ms --backoff 100ms \
  --max-backoff 300ms w2:2 >"$WORK/r2.out" 2>"$WORK/r2.err" &
RESERVE_PID=$!
first_attempt_over() { grep -qs "attempt 1 failed" "$WORK/r2.err" || exited "$RESERVE_PID"; }
wait_for 10 "reserve's first timed-out attempt" first_attempt_over
kill -CONT "$SERVER_PID"
grep -qs "attempt 1 failed" "$WORK/r2.err" ||
  fail "reserve's first attempt did not fail although the server was stopped: $(cat "$WORK/r2.out" "$WORK/r2.err")"
wait_for 30 "reserve to finish" exited "$RESERVE_PID"
wait "$RESERVE_PID" || fail "reserve across the stall failed: $(cat "$WORK/r2.err")"
RESERVE_PID=""
record_reserve "$WORK/r2.out"
grep -q "DeadlineExceeded" "$WORK/r2.err" || fail "no attempt timed out: $(cat "$WORK/r2.err")"
"$BIN/reserve" --key "$RUN-k2" --ttl 10m w2:2 >"$WORK/r2b.out" 2>"$WORK/r2b.err" || fail "reserve again: $(cat "$WORK/r2b.err")"
[ "$(field replayed "$WORK/r2b.out")" = true ] || fail "the same key again was not a replay: $(cat "$WORK/r2b.out")"
AFTER="$(reserved_of w2 default)"
[ "$AFTER" = $((BEFORE + 2)) ] || fail "w2 reserved went $BEFORE -> $AFTER, want +2 (applied once)"

# Short stock is refused at once (exit 2), not retried.
"$BIN/reserve" --ttl 10m w1:100000 >"$WORK/r3.out" 2>"$WORK/r3.err"
RC=$?
[ "$RC" = 2 ] && grep -q "FailedPrecondition" "$WORK/r3.err" && grep -q "after 1 attempt" "$WORK/r3.err" ||
  fail "short stock: exit $RC, $(cat "$WORK/r3.err")"
say "reserve: applied once across a restart and a stall, replayed with the same key"

# --- 4. an order followed across a restart ---------------------------------------------
say "order: created, paid, followed across a restart to DELIVERED"
adjust ostock --set o1=10
"$BIN/order" create --customer c-1 --key "$RUN-o1" o1:2 >"$WORK/o-create.out" 2>"$WORK/o-create.err" ||
  fail "order create: $(cat "$WORK/o-create.err")"
ORDER_ID="$(field order "$WORK/o-create.out")"
[ -n "$ORDER_ID" ] || fail "no order id: $(cat "$WORK/o-create.out")"
"$BIN/order" create --customer c-1 --key "$RUN-o1" o1:2 >"$WORK/o-create2.out" 2>"$WORK/o-create2.err" ||
  fail "order create again: $(cat "$WORK/o-create2.err")"
[ "$(field order "$WORK/o-create2.out")" = "$ORDER_ID" ] && [ "$(field replayed "$WORK/o-create2.out")" = true ] ||
  fail "the same key again is not a replay of $ORDER_ID: $(cat "$WORK/o-create2.out")"
"$BIN/order" follow "$ORDER_ID" >"$WORK/follow.out" 2>"$WORK/follow.err" &
FOLLOW_PID=$!
follow_has() { grep -qs " status=$1 " "$WORK/follow.out"; }
wait_for 10 "follow to print CONFIRMED" follow_has CONFIRMED
order_do() { # order_do NAME ARGS...: runs the order example
  local name="$1"
  shift
  "$BIN/order" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || fail "order $*: $(cat "$WORK/$name.err")"
}
order_do o-pay pay --payment-ref pay-1 "$ORDER_ID"
wait_for 10 "follow to print PAID" follow_has PAID
stop_server
sleep 0.3
start_server
for st in PACKING DISPATCHED DELIVERED; do
  order_do "o-$st" advance "$ORDER_ID" "$st"
  wait_for 20 "follow to print $st" follow_has "$st"
done
wait_for 10 "follow to exit at DELIVERED" exited "$FOLLOW_PID"
wait "$FOLLOW_PID" || fail "order follow failed: $(cat "$WORK/follow.err")"
FOLLOW_PID=""
STATUSES="$(sed -E 's/.* status=([A-Z]+) .*/\1/' "$WORK/follow.out" | tr '\n' ' ')"
[ "$STATUSES" = "CONFIRMED PAID PACKING DISPATCHED DELIVERED " ] || fail "follow printed: $STATUSES"
grep -q "reconnecting" "$WORK/follow.err" || fail "follow never reconnected: the restart was not crossed"
say "order: $STATUSES, each once, across the restart"

# --- 5. Kafka: every event of the run once ----------------------------------------------
# The last change of the run: its sequence is the run's number of events.
adjust final final=1
N="$(field seq "$WORK/final.out")"
DUP_SEQS="$(sed -E 's/^seq=([0-9]+) .*/\1/' "$WORK/changes" | sort -n | uniq -d)"
[ -z "$DUP_SEQS" ] || fail "replies gave one sequence to two changes: $DUP_SEQS"
say "kafka-consumer: sequences 1..$N"
"$BIN/kafka-consumer" --brokers "$BROKER" --topics "$TOPICS" --until-sequence "$N" --idle-exit 30s \
  >"$WORK/kafka.out" 2>"$WORK/kafka-consumer.err" || fail "kafka-consumer failed: $(tail -3 "$WORK/kafka-consumer.err")"
[ "$(wc -l <"$WORK/kafka.out")" = "$N" ] || fail "kafka-consumer printed $(wc -l <"$WORK/kafka.out") events, want $N"
DUP_IDS="$(sed -E 's/.* id=([^ ]+) .*/\1/' "$WORK/kafka.out" | sort | uniq -d)"
[ -z "$DUP_IDS" ] || fail "event ids printed twice: $DUP_IDS"
sed -E 's/^seq=([0-9]+) .*/\1/' "$WORK/kafka.out" | sort -n >"$WORK/kafka.seqs"
seq 1 "$N" | cmp -s - "$WORK/kafka.seqs" || fail "Kafka sequences are not exactly 1..$N: $(tr '\n' ' ' <"$WORK/kafka.seqs")"
# The stock events the replies reported are there with their SKU as the key.
while read -r line; do
  s="${line#seq=}" s="${s%% *}" sku="${line#* sku=}" sku="${sku%% *}"
  grep -q "^seq=$s id=[^ ]* key=$sku type=inventory.stock.changed " "$WORK/kafka.out" ||
    fail "Kafka lacks the stock event seq=$s key=$sku"
done <"$WORK/changes"
# The order's status events carry the sequences follow printed; one receipt.
sed -E 's/^seq=([0-9]+) .*/\1/' "$WORK/follow.out" | while read -r s; do
  grep -q "^seq=$s id=[^ ]* key=$ORDER_ID type=order.status.changed " "$WORK/kafka.out" || echo "$s"
done >"$WORK/missing.status"
[ ! -s "$WORK/missing.status" ] || fail "Kafka lacks the status events of $ORDER_ID at seq $(tr '\n' ' ' <"$WORK/missing.status")"
[ "$(grep -c " key=$ORDER_ID type=order.receipt " "$WORK/kafka.out")" = 1 ] || fail "Kafka has no single receipt of $ORDER_ID"
for t in "$RUN.stock" "$RUN.status" "$RUN.receipt"; do
  grep -q " topic=$t " "$WORK/kafka.out" || fail "nothing read from topic $t"
done
say "kafka: $N events, each id once, $(sed -n -E 's/.* ([0-9]+) duplicate.*/\1/p' "$WORK/kafka-consumer.err") duplicate(s) dropped"

stop_server

# --- 6. TLS with a CA file and a bearer token ------------------------------------------
say "TLS and a bearer token"
"$REPO/compose/dev-certs.sh" "$WORK/certs" >"$WORK/certs.log" 2>&1 || fail "compose/dev-certs.sh: $(cat "$WORK/certs.log")"
TOKEN="go-client-test-token-$RANDOM$RANDOM$RANDOM"
echo "$TOKEN go-client-test stock:read stock:reserve stock:adjust" >"$WORK/tokens"
echo "$TOKEN" >"$WORK/token"
FEED_SERVER="127.0.0.1:$(free_port)" || fail "no free port"
"$SERVER_BIN" --listen "$FEED_SERVER" --http-listen "" --metrics-listen "" --data-dir "$WORK/data-tls" \
  --log-rpcs false --tls-cert-file "$WORK/certs/server.crt" --tls-key-file "$WORK/certs/server.key" \
  --auth-token-file "$WORK/tokens" >"$WORK/server-tls.log" 2>&1 &
SERVER_PID=$!
wait_for 20 "the TLS server to start" grep -qs "feed-server listening on" "$WORK/server-tls.log"
TLS=(--tls-ca "$WORK/certs/ca.crt")
"$BIN/adjust" "${TLS[@]}" --token "$TOKEN" --set t1=5 >"$WORK/tls-adjust.out" 2>"$WORK/tls-adjust.err" ||
  fail "adjust over TLS with a token: $(cat "$WORK/tls-adjust.err")"
"$BIN/reserve" "${TLS[@]}" --token-file "$WORK/token" t1:2 >"$WORK/tls-reserve.out" 2>"$WORK/tls-reserve.err" ||
  fail "reserve over TLS with a token file: $(cat "$WORK/tls-reserve.err")"
[ "$(reserved_of t1 default --tls-ca "$WORK/certs/ca.crt" --token "$TOKEN")" = 2 ] || fail "t1 not reserved over TLS"
"$BIN/adjust" "${TLS[@]}" --token wrong-token t1=1 >/dev/null 2>"$WORK/tls-bad-token.err"
RC=$?
[ "$RC" = 2 ] && grep -q "Unauthenticated" "$WORK/tls-bad-token.err" || fail "a wrong token: exit $RC, $(cat "$WORK/tls-bad-token.err")"
"$BIN/adjust" --token "$TOKEN" t1=1 >/dev/null 2>"$WORK/tls-no-tls.err"
RC=$?
[ "$RC" = 1 ] && grep -q "needs TLS" "$WORK/tls-no-tls.err" || fail "a token without TLS: exit $RC, $(cat "$WORK/tls-no-tls.err")"
stop_server

# --- 7. cluster mode ---------------------------------------------------------------------
say "cluster mode: three nodes, the examples given one node's address"
NODES=()
for i in 0 1 2; do
  NODE_PORT="$(free_port)" || fail "no free port"
  "$SERVER_BIN" --listen "127.0.0.1:$NODE_PORT" --metrics-listen "" --data-dir "$WORK/node-$i" \
    --log-rpcs false --cluster-shards 12 --cluster-node-id "go-$i" --cluster-brokers "$BROKER" \
    --cluster-topic "$RUN.shard-log" --cluster-group "$RUN.cluster" >"$WORK/node-$i.log" 2>&1 &
  NODE_PIDS="$NODE_PIDS $!"
  NODES+=("127.0.0.1:$NODE_PORT")
done
wait_for 60 "the cluster's 12 shards served" \
  bash -c "[ \$(cat '$WORK'/node-*.log | grep -c 'serving at epoch') -ge 12 ]"
SHARDS=""
for i in $(seq 1 24); do
  "$BIN/adjust" --server "${NODES[0]}" --set "cl-$i=10" >/dev/null 2>"$WORK/cl-adjust.err" ||
    fail "adjust cl-$i through ${NODES[0]}: $(cat "$WORK/cl-adjust.err")"
  "$BIN/reserve" --server "${NODES[0]}" "cl-$i:2" >"$WORK/cl-reserve.out" 2>"$WORK/cl-reserve.err" ||
    fail "reserve cl-$i through ${NODES[0]}: $(cat "$WORK/cl-reserve.err")"
  id="$(sed -n 's/^reservation=\(rsv-s[0-9]*\)-.*/\1/p' "$WORK/cl-reserve.out")"
  [ -n "$id" ] || fail "reserve cl-$i: no cluster reservation id: $(cat "$WORK/cl-reserve.out")"
  grep -q "reserved=2 available=8" "$WORK/cl-reserve.out" || fail "reserve cl-$i: $(cat "$WORK/cl-reserve.out")"
  SHARDS="$SHARDS $id"
done
DISTINCT="$(echo "$SHARDS" | tr ' ' '\n' | sort -u | grep -c .)"
[ "$DISTINCT" -gt 3 ] || fail "24 SKUs answered by only $DISTINCT shards"
say "cluster: 24 SKUs adjusted and reserved through one node, on $DISTINCT shards"
# A watch given the same one address opens on each SKU's owner and sees its change. Each watch
# writes its own files: the redirect of a background job may open after wait_for first looks,
# so a shared file could still hold the previous watch's "snapshot complete".
for i in 1 2 3; do
  "$BIN/watch" --server "${NODES[0]}" --sku "cl-$i" --max-updates 1 --idle-exit 20s \
    >"$WORK/cl-watch-$i.out" 2>"$WORK/cl-watch-$i.err" &
  CL_WATCH=$!
  wait_for 20 "the cl-$i watch's snapshot" grep -qs "snapshot complete" "$WORK/cl-watch-$i.err"
  "$BIN/reserve" --server "${NODES[0]}" "cl-$i:1" >/dev/null 2>"$WORK/cl-reserve.err" ||
    fail "reserve cl-$i again: $(cat "$WORK/cl-reserve.err")"
  wait "$CL_WATCH" || fail "the cl-$i watch exited $?: $(cat "$WORK/cl-watch-$i.err")"
  grep -q "reserved=3 available=7 kind=change" "$WORK/cl-watch-$i.out" || fail "cl-$i watch: $(cat "$WORK/cl-watch-$i.out")"
done
say "cluster: three watches through one node's address, each served by its SKU's owner"

echo "go_client_test: ok ($((SECONDS - T0)) s)"

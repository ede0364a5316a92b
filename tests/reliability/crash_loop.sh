#!/usr/bin/env bash
# The crash loop: the real feed-server (sync durability, real RocksDB, relaying to the real
# Kafka broker) under concurrent reserve / commit / release / adjust load from 16 client
# threads that retry ambiguous calls with the same idempotency key (chaos-client), killed
# with SIGKILL at random moments and restarted, CYCLES times. Checks:
#   - every restart succeeds: recovery verifies reserved == sum of open holds and
#     available >= 0 (the server refuses to start otherwise);
#   - at the end the stock equals the model of the plan: no acknowledged change lost, none
#     applied twice (chaos-client verify);
#   - Kafka holds every event exactly once: sequences 1..N all present (gap-free, nothing
#     lost, nothing invented) and no event id twice (the relay's tail check skips what
#     reached Kafka before a kill), read until EXPECTED distinct events and then until the
#     topics are quiet, so duplicates at the end count too. ALLOW_DUPLICATES=1 accepts them
#     (a server started with --kafka-skip-delivered false: at-least-once);
#   - per key, the first occurrences of the events in Kafka follow the sequence order.
# With OUTAGE_SECONDS=N the broker is SIGKILLed (the partition leader dies) at the first
# cycle and comes back N seconds later; the server keeps being killed meanwhile.
#
# Usage: crash_loop.sh [CYCLES]   (10 in the test suite; 200 for the long run)
# Env: FEED_SERVER, CHAOS_CLIENT, FEEDCTL (binaries; default: build/...),
#      CRASH_SEED, CRASH_UNITS (default 2500 per cycle), OUTAGE_SECONDS (0).
set -eu
CYCLES="${1:-10}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD_DIR:-$REPO/build}"
FEED_SERVER="${FEED_SERVER:-$BUILD/feed-server/feed-server}"
CHAOS_CLIENT="${CHAOS_CLIENT:-$BUILD/tests/reliability/chaos-client}"
FEEDCTL="${FEEDCTL:-$BUILD/clients/feedctl/feedctl}"
SEED="${CRASH_SEED:-$RANDOM}"
UNITS="${CRASH_UNITS:-$((CYCLES * 2500))}"
OUTAGE="${OUTAGE_SECONDS:-0}"
ALLOW_DUPLICATES="${ALLOW_DUPLICATES:-0}"
WORK="$(mktemp -d /tmp/feed-crashloop-XXXXXX)"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)"
ADDR="127.0.0.1:$PORT"
SUFFIX="crash$RANDOM$$"
SERVER_PID=""
CLIENT_PID=""

log() { echo "crash-loop: $*" >&2; }
fail() {
  log "FAIL: $*"
  tail -20 "$WORK/server.log" >&2 || true
  exit 1
}
cleanup() {
  [ -n "$CLIENT_PID" ] && kill -9 "$CLIENT_PID" 2>/dev/null || true
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

BROKERS="$("$REPO/compose/kafka.sh" start)"
start_server() {
  local lines
  lines=$(wc -l <"$WORK/server.log" 2>/dev/null || echo 0)
  "$FEED_SERVER" --listen "$ADDR" --data-dir "$WORK/data" --metrics-listen "" --http-listen "" --log-rpcs false \
    --durability sync --kafka-brokers "$BROKERS" \
    --kafka-stock-topic "stock.$SUFFIX" --kafka-order-status-topic "status.$SUFFIX" \
    --kafka-receipt-topic "receipts.$SUFFIX" >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    tail -n +"$((lines + 1))" "$WORK/server.log" | grep -q "feed-server listening on" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || fail "the server did not restart (recovery refused the store?)"
    sleep 0.05
  done
  fail "the server did not start in 10 s"
}

: >"$WORK/server.log"
log "seed $SEED, $UNITS units, $CYCLES cycles, server $ADDR, Kafka $BROKERS"
start_server
"$CHAOS_CLIENT" run "$ADDR" "$SEED" "$UNITS" 16 >"$WORK/client.log" 2>&1 &
CLIENT_PID=$!

kills=0
outage_end=0
for cycle in $(seq 1 "$CYCLES"); do
  if [ "$cycle" = 1 ] && [ "$OUTAGE" -gt 0 ]; then
    log "broker outage: SIGKILL the broker (the partition leader) for ${OUTAGE}s"
    "$REPO/compose/kafka.sh" kill >/dev/null
    outage_end=$(($(date +%s) + OUTAGE))
  fi
  if [ "$outage_end" -gt 0 ] && [ "$(date +%s)" -ge "$outage_end" ]; then
    log "broker back"
    "$REPO/compose/kafka.sh" start >/dev/null
    outage_end=0
  fi
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.2 + (r % 1000) / 1000.0 }')"
  if ! kill -0 "$CLIENT_PID" 2>/dev/null; then
    log "the client finished after $kills kills; raise CRASH_UNITS for more"
    break
  fi
  kill -9 "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  kills=$((kills + 1))
  start_server
done

if [ "$outage_end" -gt 0 ]; then
  sleep $((outage_end - $(date +%s) > 0 ? outage_end - $(date +%s) : 0))
  log "broker back"
  "$REPO/compose/kafka.sh" start >/dev/null
fi
wait "$CLIENT_PID" || fail "chaos-client: $(cat "$WORK/client.log")"
CLIENT_PID=""
log "$(cat "$WORK/client.log")"
verify="$("$CHAOS_CLIENT" verify "$ADDR" "$SEED" "$UNITS" 2>&1)" || fail "state differs from the model: $verify"
EXPECTED="$(echo "$verify" | sed -n 's/.*expected_events=\([0-9]*\).*/\1/p')"
log "stock matches the model ($verify)"

# Every event reaches Kafka: read the three topics until idle, deduplicated by event id.
"$FEEDCTL" events tail --brokers "$BROKERS" --group "verify-$SUFFIX" --from-beginning \
  --topics "stock.$SUFFIX" --topics "status.$SUFFIX" --topics "receipts.$SUFFIX" \
  --idle-exit-ms 10000 >"$WORK/events.txt" 2>"$WORK/consumer.log" || true
distinct="$(sed -n 's/^seq=\([0-9]*\) .*/\1/p' "$WORK/events.txt" | sort -n | uniq | wc -l)"
first="$(sed -n 's/^seq=\([0-9]*\) .*/\1/p' "$WORK/events.txt" | sort -n | head -1)"
last="$(sed -n 's/^seq=\([0-9]*\) .*/\1/p' "$WORK/events.txt" | sort -n | tail -1)"
log "Kafka: $(tail -1 "$WORK/consumer.log")"
[ "$distinct" = "$EXPECTED" ] || fail "Kafka has $distinct distinct events, expected $EXPECTED"
[ "$first" = 1 ] && [ "$last" = "$EXPECTED" ] || fail "Kafka sequences $first..$last, expected 1..$EXPECTED"
duplicates="$(sed -n 's/.* \([0-9]*\) duplicates dropped.*/\1/p' "$WORK/consumer.log" | tail -1)"
[ -n "$duplicates" ] || fail "no summary from the consumer: $(tail -3 "$WORK/consumer.log")"
if [ "$ALLOW_DUPLICATES" != 1 ] && [ "$duplicates" != 0 ]; then
  fail "$duplicates records reached Kafka twice under an event id already there"
fi
# Per key, in consumption order (one partition per key), first occurrences increase.
disorder="$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
  if (f["key"] in last && f["seq"] + 0 < last[f["key"]]) bad++
  last[f["key"]] = f["seq"] + 0 } END { print bad + 0 }' "$WORK/events.txt")"
[ "$disorder" = 0 ] || fail "$disorder events arrived out of sequence order for their key"

kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "exit code after SIGTERM"
SERVER_PID=""
echo "crash-loop: OK: $kills SIGKILLs, seed $SEED, $EXPECTED events all in Kafka, $duplicates duplicates; $(cat "$WORK/client.log")"

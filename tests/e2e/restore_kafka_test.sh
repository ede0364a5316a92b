#!/usr/bin/env bash
# End-to-end: a backup taken under load, restored into a new data dir, and Kafka audited by
# event id afterwards: nothing lost, nothing doubled across the two timelines.
#   1. server A relays to its own topics; feedctl adjusts stock in a loop; `feedctl backup`
#      mid-load; the load ends; A stops (SIGTERM: its relay delivers everything);
#   2. server B starts with --restore-from the backup (a new store id): its relay resumes from
#      the backup's cursor, and its tail check finds the events A had already delivered;
#      more changes on B; B stops;
#   3. the topics hold, with no record twice: A's events 1..A_LAST under A's store id, and B's
#      events after the backup's last sequence under B's store id;
#   4. `feedctl replay` on B: B's events of the stock topic sent again; past the end and an
#      unknown topic refused.
#
# Usage: restore_kafka_test.sh FEED_SERVER FEEDCTL REPO
set -u
SERVER_BIN="$1" FEEDCTL="$2" REPO="$3"
WORK="$(mktemp -d /tmp/restore-kafka-test-XXXXXX)"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BROKERS="$("$REPO/compose/kafka.sh" start)" || fail "no Kafka broker"
SUFFIX="restore$RANDOM$$"
TOPICS=("stock.$SUFFIX" "status.$SUFFIX" "receipts.$SUFFIX")
start_relaying() {  # start_relaying LOG ARGS...: start_server with this run's topics
  local log="$1"; shift
  start_server "$log" --kafka-brokers "$BROKERS" --kafka-stock-topic "${TOPICS[0]}" \
    --kafka-order-status-topic "${TOPICS[1]}" --kafka-receipt-topic "${TOPICS[2]}" "$@"
}
last_sequence() {  # the running server's last committed sequence
  "$FEEDCTL" --json check --progress off |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["asOfSequence"])'
}

# 1. Server A under load, a backup in the middle.
start_relaying "$WORK/server-a.log" --data-dir "$WORK/a" --backup-dir "$WORK/backups"
export FEEDCTL_SERVER="127.0.0.1:$PORT"
# A burst (batches of 500 adjustments) keeps the relay's cursor behind the last sequence for a
# moment, so the backup most likely holds events its cursor has not passed: B sends those again
# unless its tail check finds them (A delivered them all before it stopped).
python3 -c 'import sys
print("sku,location,quantity")
for i in range(100000): print(f"sku-{i % 997},,{i}")' >"$WORK/burst.csv"
for i in $(seq 1 5); do "$FEEDCTL" stock adjust warm-up "$i" --set >/dev/null || fail "adjust on A"; done
sleep 0.5  # the relay has a cursor by now
"$FEEDCTL" stock import "$WORK/burst.csv" --progress off >"$WORK/load-a.out" 2>&1 &
LOAD=$!
sleep 0.3
"$FEEDCTL" backup --to mid --progress off >"$WORK/backup.out" 2>&1 || fail "backup: $(cat "$WORK/backup.out")"
wait "$LOAD" || fail "load on A: $(cat "$WORK/load-a.out")"
A_LAST="$(last_sequence)"
stop_server
read -r A_ID M_LAST M_CURSOR < <(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))
print(m["store_id"], m["last_sequence"], m["relay_cursor"])' "$WORK/backups/mid/BACKUP-MANIFEST.json")
[ "$M_LAST" -gt 0 ] && [ "$M_LAST" -lt "$A_LAST" ] || fail "backup at $M_LAST of $A_LAST: not mid-load"

# 2. Server B on the restored backup, more changes.
start_relaying "$WORK/server-b.log" --data-dir "$WORK/b" --restore-from "$WORK/backups/mid"
export FEEDCTL_SERVER="127.0.0.1:$PORT"
for i in $(seq 1 40); do "$FEEDCTL" stock adjust "sku-b$((i % 5))" "$i" --set >/dev/null || fail "adjust on B"; done
B_LAST="$(last_sequence)"
B_ID="$(sed -n 's/.*recovered .* store id \([0-9a-f]*\) in .*/\1/p' "$WORK/server-b.log" | head -1)"
[ -n "$B_ID" ] && [ "$B_ID" != "$A_ID" ] || fail "B's store id '$B_ID' (A's: $A_ID)"
stop_server
FROM=$((M_CURSOR > 0 ? M_CURSOR : 1))  # no cursor stored yet: the relay starts at the journal's first
if [ "$FROM" -le "$M_LAST" ]; then
  grep -q "tail check from sequence $FROM:" "$WORK/server-b.log" ||
    fail "B's relay did not check the tail from the backup's cursor $FROM: $(grep relay "$WORK/server-b.log")"
  echo "restore_kafka_test: the backup's cursor $FROM was behind its last sequence $M_LAST: B's tail check found what A had sent"
else
  echo "restore_kafka_test: the backup's relay had caught up ($M_CURSOR): no event to send again"
fi

# 3. The topics, audited by event id.
"$FEEDCTL" --json events tail --brokers "$BROKERS" --group "verify-$SUFFIX" --from-beginning \
  --topics "${TOPICS[0]}" --topics "${TOPICS[1]}" --topics "${TOPICS[2]}" \
  --idle-exit-ms 10000 >"$WORK/events.json" 2>"$WORK/consumer.log" || true
grep -q " 0 duplicates dropped" "$WORK/consumer.log" || fail "records twice: $(tail -1 "$WORK/consumer.log")"
python3 - "$WORK/events.json" "$A_ID" "$A_LAST" "$B_ID" "$M_LAST" "$B_LAST" <<'PY' || fail "audit"
import json, sys
path, a_id, a_last, b_id, m_last, b_last = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:4]), sys.argv[4], *map(int, sys.argv[5:7])
seen = {}
for line in open(path):
    e = json.loads(line)
    store, seq = e["eventId"].rsplit("-", 1)
    seen.setdefault(store, []).append(int(seq))
a, b = sorted(seen.get(a_id, [])), sorted(seen.get(b_id, []))
assert a == list(range(1, a_last + 1)), f"A: {len(a)} events, want 1..{a_last}"
assert b == list(range(m_last + 1, b_last + 1)), f"B: {b[:3]}..{b[-3:]}, want {m_last + 1}..{b_last}"
assert set(seen) == {a_id, b_id}, f"stores {sorted(seen)}"
print(f"restore_kafka_test: A {a_last} events, backup at {m_last}, B {b_last - m_last} more, each once")
PY

# 4. feedctl replay on B (after the audit: it sends records again on purpose).
start_relaying "$WORK/server-b2.log" --data-dir "$WORK/b"
export FEEDCTL_SERVER="127.0.0.1:$PORT"
"$FEEDCTL" replay --from-sequence "$((M_LAST + 1))" --topic "${TOPICS[0]}" --progress off \
  >"$WORK/replay.out" 2>&1 || fail "replay: $(cat "$WORK/replay.out")"
grep -q "^replayed sequences $((M_LAST + 1))..$B_LAST: 40 records sent and acknowledged in" "$WORK/replay.out" ||
  fail "replay: $(cat "$WORK/replay.out")"
"$FEEDCTL" replay --from-sequence "$((B_LAST + 5))" --progress off >"$WORK/replay.out" 2>&1
[ $? = 2 ] && grep -q "OUT_OF_RANGE" "$WORK/replay.out" || fail "replay past the end: $(cat "$WORK/replay.out")"
"$FEEDCTL" replay --from-sequence 1 --topic nope --progress off >"$WORK/replay.out" 2>&1
grep -q "INVALID_ARGUMENT: topic: 'nope'" "$WORK/replay.out" || fail "replay bad topic: $(cat "$WORK/replay.out")"
stop_server
echo "restore_kafka_test: ok"

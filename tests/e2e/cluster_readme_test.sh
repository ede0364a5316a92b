#!/usr/bin/env bash
# The README's cluster mode commands against the real binary and the real broker: three nodes
# on this machine share 12 shards (GetShardMap from any node lists them all, claimed, spread
# over the three); a call on a node that does not serve its shard is answered UNAVAILABLE with
# the owner's address in `feed-shard-owner`; the owner serves it, and an id it generates names
# its shard. Over HTTP every node serves every call: one whose shard another node serves is
# forwarded to it.
#
# feedctl asked on the wrong node follows `feed-shard-owner` to the owner; its stock import
# sends each shard's lines to the shard's owner, its check audits every shard, and its export
# and watch read every shard on its owner.
#
# Usage: cluster_readme_test.sh FEED_SERVER_BINARY REPO_DIR FEEDCTL_BINARY
set -u
SERVER_BIN="$1"
REPO="$2"
FEEDCTL="$3"
export PATH="$REPO/.cache/gobin:$PATH"
WORK="$(mktemp -d /tmp/feed-cluster-e2e-XXXXXX)"
# shellcheck source=lib.sh
source "$REPO/tests/e2e/lib.sh"
BROKERS="$("$REPO/compose/kafka.sh" status)" || fail "no broker: compose/kafka.sh start"
SUFFIX="e2e$RANDOM$$"
ADDRS=()
declare -A HTTP  # gRPC address -> the node's HTTP address
for i in 0 1 2; do
  http_port="$(free_port)"
  HTTP_LISTEN="127.0.0.1:$http_port" start_server "$WORK/server-$i.log" --cluster-shards 12 \
    --cluster-node-id "node-$i" --data-dir "$WORK/node-$i" --kafka-brokers "$BROKERS" \
    --cluster-topic "shard-log.$SUFFIX" --cluster-group "cluster.$SUFFIX"
  ADDRS+=("127.0.0.1:$PORT")
  HTTP["127.0.0.1:$PORT"]="127.0.0.1:$http_port"
done

CLUSTER_SHARDS=12
# shellcheck source=cluster_lib.sh
source "$REPO/tests/e2e/cluster_lib.sh"
settle
echo "$OUT" | grep -q '"shard_count": 12' || fail "shard_count: $OUT"

# sku-1's shard by the documented hash (FNV-1a 64 of the UTF-8 bytes, mod 12), and its owner.
shard="$(python3 "$WORK/shard_of.py" sku-1)"
# The same key on every try: a try that found the shard moved in between applies once.
ADJUST='{"sku":"sku-1","quantity":10,"mode":"ADJUST_MODE_DELTA","reason":"e2e","idempotency_key":"e2e-adjust"}'
for try in 1 2 3; do
  owner="$(echo "$OUT" | python3 -c "import json, sys; print(json.load(sys.stdin)['shards'][$shard]['address'])")"
  other=""
  for a in "${ADDRS[@]}"; do [ "$a" != "$owner" ] && other="$a"; done
  wrong="$(grpcurl -v -plaintext -d "$ADJUST" "$other" inventory.v1.InventoryService/AdjustStock 2>&1)"
  echo "$wrong" | grep -q "Code: Unavailable" && break
  # The shard moved to $other after the map settled: settle again.
  [ "$try" = 3 ] && fail "the wrong node answered: $wrong"
  sleep 1
  settle
done
echo "$wrong" | grep -q "feed-shard-owner: $owner" || fail "no feed-shard-owner $owner: $wrong"
expect 0 grpcurl -plaintext -d "$ADJUST" "$owner" inventory.v1.InventoryService/AdjustStock
echo "$OUT" | grep -q '"on_hand": "10"' || fail "adjust on the owner: $OUT"
expect 0 grpcurl -plaintext -d '{"lines":[{"sku":"sku-1","quantity":2}]}' "$owner" \
  inventory.v1.InventoryService/Reserve
echo "$OUT" | grep -q "\"reservation_id\": \"rsv-s$shard-" || fail "reservation id: $OUT"
id="$(echo "$OUT" | python3 -c 'import json, sys; print(json.load(sys.stdin)["reservation"]["reservation_id"])')"
expect 0 grpcurl -plaintext -d "{\"reservation_id\":\"$id\"}" "$owner" \
  inventory.v1.InventoryService/GetReservation
# feedctl follows feed-shard-owner: asked on a node that does not serve the shard, it
# answers from the owner (unary calls; its watches resume there the same way).
expect 0 "$FEEDCTL" --server "$other" --json reservation get "$id"
echo "$OUT" | grep -q "\"reservationId\":\"$id\"" || fail "feedctl through $other: $OUT"
expect 0 "$FEEDCTL" --server "$other" --json stock get sku-1
echo "$OUT" | grep -q '"reserved":"2"' || fail "feedctl stock get through $other: $OUT"
# feedctl stock import: a file spanning shards goes out as one batch per shard, each to its
# owner, whichever node --server names; a second run applies nothing twice.
printf 'sku,location,quantity\n' >"$WORK/counts.csv"
for n in $(seq 20 27); do printf 'sku-%s,,%s\n' "$n" "$n" >>"$WORK/counts.csv"; done
expect 0 "$FEEDCTL" --server "$other" --json stock import --batch 3 "$WORK/counts.csv"
echo "$OUT" | grep -q '"applied":8' && echo "$OUT" | grep -q '"failed":0' ||
  fail "feedctl stock import across shards: $OUT"
expect 0 "$FEEDCTL" --server "$owner" --json stock import --batch 3 "$WORK/counts.csv"
echo "$OUT" | grep -q '"replayed":8' || fail "feedctl stock import again: $OUT"
expect 0 "$FEEDCTL" --server "$owner" --json stock get sku-23
echo "$OUT" | grep -q '"onHand":"23"' || fail "sku-23 after the import: $OUT"
# feedctl stock export: every level, one cut per shard read on its owner (a watch of every
# SKU of a shard names it in the metadata feed-shard); named SKUs grouped by shard.
expect 0 "$FEEDCTL" --server "$other" stock export -o "$WORK/export.csv"
[ "$(grep -c '^sku-2[0-7],' "$WORK/export.csv")" = 8 ] && grep -q '^sku-1,' "$WORK/export.csv" ||
  fail "feedctl stock export in cluster mode: $(cat "$WORK/export.csv")"
expect 0 "$FEEDCTL" --server "$other" stock export sku-1 sku-20 sku-21
[ "$(echo "$OUT" | grep -c '^sku-')" = 3 ] || fail "feedctl stock export of named SKUs: $OUT"
# feedctl stock watch: one stream per shard on its owner (every level, or named SKUs).
expect 0 "$FEEDCTL" --server "$other" --json stock watch --once
[ "$(echo "$OUT" | grep -c '"sku":"sku-2[0-7]"')" = 8 ] || fail "feedctl stock watch of every level: $OUT"
expect 0 "$FEEDCTL" --server "$other" --json stock watch --once sku-1 sku-20
[ "$(echo "$OUT" | grep -c '"sku":"sku-')" = 2 ] || fail "feedctl stock watch sku-1 sku-20: $OUT"
# feedctl check audits every shard's store on its owner, whichever node it is given; the
# AdminService of a node audits its own copy of a shard (a standby's, where it does not own
# it), and asks for a shard in cluster mode; Backup is not served there yet.
expect 0 "$FEEDCTL" --server "$other" --json check
echo "$OUT" | python3 -c '
import json, sys
audits = [json.loads(line) for line in sys.stdin if line.strip()]
assert sorted(a["shard"] for a in audits) == list(range(12)), audits
assert all(not a["standby"] and a["violationCount"] == "0" for a in audits), audits
assert sum(int(a["journalEntriesChecked"]) for a in audits) > 0, audits
' || fail "feedctl check in cluster mode: $OUT"
expect 0 grpcurl -plaintext -d "{\"shard\":$shard}" "$other" admin.v1.AdminService/CheckStore
echo "$OUT" | grep -q '"standby": true' || fail "CheckStore of a standby copy: $OUT"
echo "$OUT" | grep -q '"violation_count"' && fail "violations in a standby copy: $OUT"
no_shard="$(grpcurl -plaintext -d '{}' "$other" admin.v1.AdminService/CheckStore 2>&1)"
echo "$no_shard" | grep -q "InvalidArgument" && echo "$no_shard" | grep -q "shard: required" ||
  fail "CheckStore without a shard: $no_shard"
# Replay is not served in cluster mode yet (Backup is, per shard: cluster_backup_test.sh).
replay="$(grpcurl -plaintext -d '{"from_sequence":1}' "$owner" admin.v1.AdminService/Replay 2>&1)"
echo "$replay" | grep -q "FailedPrecondition" && echo "$replay" | grep -q "Replay is not served" ||
  fail "Replay in cluster mode: $replay"
# A reservation on two shards is refused, naming them.
two=""
for n in $(seq 2 50); do
  [ "$(python3 "$WORK/shard_of.py" "sku-$n")" != "$shard" ] && two="sku-$n" && break
done
refused="$(grpcurl -plaintext -d "{\"lines\":[{\"sku\":\"sku-1\",\"quantity\":1},{\"sku\":\"$two\",\"quantity\":1}]}" \
  "$owner" inventory.v1.InventoryService/Reserve 2>&1)"
echo "$refused" | grep -q "FailedPrecondition" || fail "two shards: $refused"
echo "$refused" | grep -q "the SKUs are on shards" || fail "two shards: $refused"

# The HTTP gateway of every node: a unary call whose shard another node serves is forwarded
# there; a stream of another node's shard is refused with the owner in Feed-Shard-Owner.
third=""
for a in "${ADDRS[@]}"; do [ "$a" != "$owner" ] && [ "$a" != "$other" ] && third="$a"; done
expect 0 curl -sS "http://${HTTP[$other]}/v1/shards"
echo "$OUT" | grep -q '"shardCount":12' || fail "GET /v1/shards: $OUT"
code="$(curl -sS -o "$WORK/http.json" -w '%{http_code}' -X POST "http://${HTTP[$other]}/v1/reservations" \
  -H 'Idempotency-Key: e2e-http-1' -d '{"lines":[{"sku":"sku-1","quantity":3}]}')"
[ "$code" = 201 ] || fail "POST /v1/reservations on a node without the shard: $code $(cat "$WORK/http.json")"
http_id="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["reservation"]["reservationId"])' "$WORK/http.json")"
case "$http_id" in rsv-s$shard-*) ;; *) fail "forwarded reservation id: $http_id" ;; esac
# The same key again through the third node: the owner replays its answer.
replay="$(curl -sS -D - -o /dev/null -X POST "http://${HTTP[$third]}/v1/reservations" \
  -H 'Idempotency-Key: e2e-http-1' -d '{"lines":[{"sku":"sku-1","quantity":3}]}')"
echo "$replay" | grep -qi "^Idempotent-Replayed: true" || fail "forwarded retry not replayed: $replay"
expect 0 curl -sS -f "http://${HTTP[$third]}/v1/reservations/$http_id"
echo "$OUT" | grep -q "\"$http_id\"" || fail "GET the forwarded reservation: $OUT"
expect 0 curl -sS -f "http://${HTTP[$third]}/v1/stock?sku=sku-1"
echo "$OUT" | grep -q '"reserved":"5"' || fail "stock after 2 + 3 reserved: $OUT"
# The owner's refusal comes back as it is: two shards in one reservation.
code="$(curl -sS -o "$WORK/http.json" -w '%{http_code}' -X POST "http://${HTTP[$other]}/v1/reservations" \
  -d "{\"lines\":[{\"sku\":\"sku-1\",\"quantity\":1},{\"sku\":\"$two\",\"quantity\":1}]}")"
[ "$code" = 400 ] && grep -q "the SKUs are on shards" "$WORK/http.json" ||
  fail "two shards over HTTP: $code $(cat "$WORK/http.json")"
headers="$(curl -sS -D - -o /dev/null -m 5 "http://${HTTP[$other]}/v1/stock:watch?sku=sku-1")"
echo "$headers" | grep -q "^HTTP/1.1 503" || fail "a stream of another node's shard: $headers"
echo "$headers" | grep -qi "^Feed-Shard-Owner: $owner" || fail "no Feed-Shard-Owner $owner: $headers"
# On the owner the stream runs: a snapshot of sku-1.
curl -sS -m 2 "http://${HTTP[$owner]}/v1/stock:watch?sku=sku-1" >"$WORK/watch.ndjson" 2>/dev/null
grep -q '"KIND_SNAPSHOT"' "$WORK/watch.ndjson" || fail "watch on the owner: $(head -3 "$WORK/watch.ndjson")"
# A watch of every SKU of one shard over HTTP names it in the feed-shard header: on the owner
# its snapshot holds sku-1 and every imported SKU of that shard, and no SKU of another (the
# imported sku-20..27 are spread over the shards); elsewhere 503 with the owner; a header that
# is no shard number is a 400 naming it.
curl -sS -m 2 -H "feed-shard: $shard" "http://${HTTP[$owner]}/v1/stock:watch" \
  >"$WORK/shard-watch.ndjson" 2>/dev/null
cat >"$WORK/shard_watch_check.py" <<'PY'
import json, sys
from shard_of import shard_of
shard, path = int(sys.argv[1]), sys.argv[2]
seen = {json.loads(l)["result"]["level"]["sku"] for l in open(path) if '"KIND_SNAPSHOT"' in l}
expected = {"sku-1"} | {"sku-%d" % n for n in range(20, 28) if shard_of("sku-%d" % n) == shard}
others = {s for s in seen if shard_of(s) != shard}
if others or not expected <= seen:
    sys.exit("shard %d: snapshot %s; missing %s; of other shards %s"
             % (shard, sorted(seen), sorted(expected - seen), sorted(others)))
PY
python3 "$WORK/shard_watch_check.py" "$shard" "$WORK/shard-watch.ndjson" ||
  fail "whole-shard watch over HTTP on the owner"
headers="$(curl -sS -D - -o /dev/null -m 5 -H "feed-shard: $shard" "http://${HTTP[$other]}/v1/stock:watch")"
echo "$headers" | grep -q "^HTTP/1.1 503" || fail "a whole-shard watch on another node: $headers"
echo "$headers" | grep -qi "^Feed-Shard-Owner: $owner" || fail "no Feed-Shard-Owner $owner: $headers"
code="$(curl -sS -o "$WORK/http.json" -w '%{http_code}' -m 5 -H 'feed-shard: x' "http://${HTTP[$owner]}/v1/stock:watch")"
[ "$code" = 400 ] && grep -q "feed-shard: 'x' is not a shard number" "$WORK/http.json" ||
  fail "a bad feed-shard header: $code $(cat "$WORK/http.json")"
code="$(curl -sS -o "$WORK/http.json" -w '%{http_code}' -m 5 "http://${HTTP[$owner]}/v1/stock:watch")"
[ "$code" = 400 ] && grep -q "feed-shard" "$WORK/http.json" ||
  fail "a watch of every SKU without feed-shard: $code $(cat "$WORK/http.json")"
echo "cluster readme commands: ok (sku-1 on shard $shard at $owner; HTTP forwarded from $other)"

#!/usr/bin/env bash
# The README's cluster mode commands against the real binary and the real broker: three nodes
# on this machine share 12 shards (GetShardMap from any node lists them all, claimed, spread
# over the three); a call on a node that does not serve its shard is answered UNAVAILABLE with
# the owner's address in `feed-shard-owner`; the owner serves it, and an id it generates names
# its shard.
#
# Usage: cluster_readme_test.sh FEED_SERVER_BINARY REPO_DIR
set -u
SERVER_BIN="$1"
REPO="$2"
export PATH="$REPO/.cache/gobin:$PATH"
WORK="$(mktemp -d /tmp/feed-cluster-e2e-XXXXXX)"
# shellcheck source=lib.sh
source "$REPO/tests/e2e/lib.sh"
BROKERS="$("$REPO/compose/kafka.sh" status)" || fail "no broker: compose/kafka.sh start"
SUFFIX="e2e$RANDOM$$"
ADDRS=()
for i in 0 1 2; do
  start_server "$WORK/server-$i.log" --cluster-shards 12 --cluster-node-id "node-$i" \
    --data-dir "$WORK/node-$i" --kafka-brokers "$BROKERS" --cluster-topic "shard-log.$SUFFIX" \
    --cluster-group "cluster.$SUFFIX"
  ADDRS+=("127.0.0.1:$PORT")
done

cat >"$WORK/map_summary.py" <<'PY'
import json, sys
shards = json.load(sys.stdin)["shards"]
claimed = sum(1 for s in shards if int(s.get("epoch", "0")) > 0)
owners = len({s["node_id"] for s in shards})
print(claimed, owners, " ".join("%d:%s@%s" % (s.get("shard", 0), s["node_id"], s.get("epoch", 0)) for s in shards))
PY
# "<claimed shards> <distinct owners> <shard:node@epoch ...>" of the map in $OUT
map_summary() { echo "$OUT" | python3 "$WORK/map_summary.py"; }
# settle: waits until every node reads the same map, 12 shards claimed over the 3 nodes, and
# it has not changed for half a second (the group's cooperative rebalance moves shards in more
# than one step); the map is then in $OUT.
settle() {
  local previous="" views="" first="" a
  for _ in $(seq 1 120); do
    views=""
    for a in "${ADDRS[@]}"; do
      expect 0 grpcurl -plaintext "$a" inventory.v1.InventoryService/GetShardMap
      views="$views|$(map_summary)"
    done
    first="${views#|}"
    first="${first%%|*}"
    if [ "$views" = "|$first|$first|$first" ] && [ "${first%% *}" = 12 ] &&
      [ "$(echo "$first" | cut -d' ' -f2)" = 3 ] && [ "$first" = "$previous" ]; then
      return 0
    fi
    previous="$first"
    [ "$views" = "|$first|$first|$first" ] || previous=""
    sleep 0.5
  done
  fail "the shard map did not settle over 3 nodes: $views"
}
settle
echo "$OUT" | grep -q '"shard_count": 12' || fail "shard_count: $OUT"

# sku-1's shard by the documented hash (FNV-1a 64 of the UTF-8 bytes, mod 12), and its owner.
shard="$(python3 -c 'h = 0xcbf29ce484222325
for b in b"sku-1":
    h = ((h ^ b) * 0x100000001b3) % 2**64
print(h % 12)')"
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
# A reservation on two shards is refused, naming them.
two=""
for n in $(seq 2 50); do
  s="$(python3 -c "h = 0xcbf29ce484222325
for b in b'sku-$n':
    h = ((h ^ b) * 0x100000001b3) % 2**64
print(h % 12)")"
  [ "$s" != "$shard" ] && two="sku-$n" && break
done
refused="$(grpcurl -plaintext -d "{\"lines\":[{\"sku\":\"sku-1\",\"quantity\":1},{\"sku\":\"$two\",\"quantity\":1}]}" \
  "$owner" inventory.v1.InventoryService/Reserve 2>&1)"
echo "$refused" | grep -q "FailedPrecondition" || fail "two shards: $refused"
echo "$refused" | grep -q "the SKUs are on shards" || fail "two shards: $refused"
echo "cluster readme commands: ok (sku-1 on shard $shard at $owner)"

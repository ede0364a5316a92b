# Shared by the e2e scripts that run cluster nodes: sourced after lib.sh, with ADDRS (the
# nodes' gRPC addresses) and CLUSTER_SHARDS set.
#
# The shard of a SKU (FNV-1a 64 of its UTF-8 bytes mod the shard count, common/shard_hash.h):
# `python3 "$WORK/shard_of.py" SKU`, or `from shard_of import shard_of` in a script in $WORK.
cat >"$WORK/shard_of.py" <<PY
import sys
SHARDS = $CLUSTER_SHARDS
def shard_of(sku):
    h = 0xcbf29ce484222325
    for b in sku.encode():
        h = ((h ^ b) * 0x100000001b3) % 2**64
    return h % SHARDS
if __name__ == "__main__":
    print(shard_of(sys.argv[1]))
PY
cat >"$WORK/map_summary.py" <<'PY'
import json, sys
shards = json.load(sys.stdin)["shards"]
claimed = sum(1 for s in shards if int(s.get("epoch", "0")) > 0)
owners = len({s["node_id"] for s in shards})
print(claimed, owners, " ".join("%d:%s@%s" % (s.get("shard", 0), s["node_id"], s.get("epoch", 0)) for s in shards))
PY
# "<claimed shards> <distinct owners> <shard:node@epoch ...>" of the map in $OUT
map_summary() { echo "$OUT" | python3 "$WORK/map_summary.py"; }
# settle [OWNERS]: waits until every node of ADDRS reads the same map, every shard claimed
# over OWNERS nodes (default: all of ADDRS), and it has not changed for half a second (the
# group's cooperative rebalance moves shards in more than one step); the map is then in $OUT.
settle() {
  local owners="${1:-${#ADDRS[@]}}" previous="" views="" first="" same a
  for _ in $(seq 1 120); do
    views=""
    same=""
    for a in "${ADDRS[@]}"; do
      expect 0 grpcurl -plaintext "$a" inventory.v1.InventoryService/GetShardMap
      views="$views|$(map_summary)"
    done
    first="${views#|}"
    first="${first%%|*}"
    for a in "${ADDRS[@]}"; do same="$same|$first"; done
    if [ "$views" = "$same" ] && [ "${first%% *}" = "$CLUSTER_SHARDS" ] &&
      [ "$(echo "$first" | cut -d' ' -f2)" = "$owners" ] && [ "$first" = "$previous" ]; then
      return 0
    fi
    previous="$first"
    [ "$views" = "$same" ] || previous=""
    sleep 0.5
  done
  fail "the shard map did not settle over $owners nodes: $views"
}

#!/usr/bin/env bash
# Backups in cluster mode, and a node seeded from one: two nodes share 4 shards; `feedctl
# backup` on one node copies every shard as that node holds it (its own and its standby
# copies) into <name>/shard-<n>; stock changes after the backup; a third node starts with
# --restore-from the backup and reads each shard's log from the backup's offset on. Once the
# first two are killed (-9) it serves every shard and holds every change, the ones after the
# backup included, with every invariant intact. Refusals: Backup without a shard, a name
# taken, a restore of a single shard folder, into a non-empty folder, and of a shard backup
# on a single node.
#
# Usage: cluster_backup_test.sh FEED_SERVER_BINARY REPO_DIR FEEDCTL_BINARY
set -u
SERVER_BIN="$1"
REPO="$2"
FEEDCTL="$3"
export PATH="$REPO/.cache/gobin:$PATH"
WORK="$(mktemp -d /tmp/feed-cluster-backup-XXXXXX)"
# shellcheck source=lib.sh
source "$REPO/tests/e2e/lib.sh"
BROKERS="$("$REPO/compose/kafka.sh" status)" || fail "no broker: compose/kafka.sh start"
SUFFIX="e2e$RANDOM$$"
CLUSTER_SHARDS=4
node_args() {  # node_args I: the flags of node-I
  echo --cluster-shards "$CLUSTER_SHARDS" --cluster-node-id "node-$1" --kafka-brokers "$BROKERS" \
    --cluster-topic "shard-log.$SUFFIX" --cluster-group "cluster.$SUFFIX" \
    --backup-dir "$WORK/backups"
}
ADDRS=()
NODE_PIDS=()
for i in 0 1; do
  # shellcheck disable=SC2046
  start_server "$WORK/server-$i.log" $(node_args "$i") --data-dir "$WORK/node-$i"
  ADDRS+=("127.0.0.1:$PORT")
  NODE_PIDS+=("$PID")
done
# shellcheck source=cluster_lib.sh
source "$REPO/tests/e2e/cluster_lib.sh"
settle
F=("$FEEDCTL" --server "${ADDRS[1]}")

# Stock on every shard (sku-1..sku-12 spread over the 4), routed by feedctl to each owner.
SKUS=()
for n in $(seq 1 12); do SKUS+=("sku-$n"); done
for sku in "${SKUS[@]}"; do expect 0 "${F[@]}" stock adjust "$sku" 100 --set; done
[ "$(for sku in "${SKUS[@]}"; do python3 "$WORK/shard_of.py" "$sku"; done | sort -u | wc -l)" = 4 ] ||
  fail "sku-1..sku-12 do not cover the 4 shards"

# The backup: one line per shard, each a standby copy or the node's own; the folders are
# there with their manifests.
expect 0 "${F[@]}" backup --to b1 --progress off
[ "$(echo "$OUT" | grep -c '^shard [0-3].*backup of store')" = 4 ] || fail "feedctl backup: $OUT"
echo "$OUT" | grep -q '(standby copy)' || fail "no standby copy backed up: $OUT"
[ "$(echo "$OUT" | grep -c '(standby copy)')" -lt 4 ] || fail "no own shard backed up: $OUT"
echo "$OUT" | grep -q 'reads the shard.s log from offset [1-9]' || fail "no log offset: $OUT"
for s in 0 1 2 3; do
  [ -f "$WORK/backups/b1/shard-$s/BACKUP-MANIFEST.json" ] || fail "no manifest of shard $s"
  grep -q "\"shard\": $s" "$WORK/backups/b1/shard-$s/BACKUP-MANIFEST.json" ||
    fail "manifest of shard $s: $(cat "$WORK/backups/b1/shard-$s/BACKUP-MANIFEST.json")"
done
# Refusals: no shard named; the name (and shard) taken already.
out="$(grpcurl -plaintext -d '{"name":"b2"}' "${ADDRS[0]}" admin.v1.AdminService/Backup 2>&1)"
echo "$out" | grep -q "InvalidArgument" && echo "$out" | grep -q "shard: required in cluster mode" ||
  fail "Backup without a shard: $out"
out="$(grpcurl -plaintext -d '{"name":"b1","shard":0}' "${ADDRS[1]}" admin.v1.AdminService/Backup 2>&1)"
echo "$out" | grep -q "AlreadyExists" || fail "Backup of a taken name: $out"

# Changes after the backup: the restored node must find them in the log.
for sku in "${SKUS[@]}"; do expect 0 "${F[@]}" stock adjust "$sku" 7 --set; done
expect 0 "${F[@]}" reservation create sku-1:2 --ttl-ms 600000

# Restores that are refused, before anything is copied or started.
mkdir -p "$WORK/full" && echo x >"$WORK/full/file"
refused() {  # refused WHAT PATTERN ARGS...: feed-server ARGS exits 1 with PATTERN in its log
  local what="$1" pattern="$2"; shift 2
  "$SERVER_BIN" --listen "127.0.0.1:$(free_port)" --http-listen "" --metrics-listen "" "$@" \
    >"$WORK/refused.log" 2>&1
  [ $? = 1 ] || fail "$what: should exit 1 ($(tail -3 "$WORK/refused.log"))"
  grep -q "$pattern" "$WORK/refused.log" || fail "$what: $(tail -3 "$WORK/refused.log")"
}
# shellcheck disable=SC2046
refused "a restore of one shard's folder" "holds no shard-<n> backup folder" \
  $(node_args 9) --data-dir "$WORK/node-9" --restore-from "$WORK/backups/b1/shard-0"
mkdir -p "$WORK/node-8/shard-2" && echo x >"$WORK/node-8/shard-2/file"
# shellcheck disable=SC2046
refused "a restore into a non-empty shard folder" "is not empty" \
  $(node_args 8) --data-dir "$WORK/node-8" --restore-from "$WORK/backups/b1"
[ ! -e "$WORK/node-8/shard-0" ] || fail "a refused restore copied shard 0"
refused "a shard backup on a single node" "is a backup of shard 0 of a cluster" \
  --data-dir "$WORK/single" --restore-from "$WORK/backups/b1/shard-0"

# The new node, seeded from the backup.
# shellcheck disable=SC2046
start_server "$WORK/server-2.log" $(node_args 2) --data-dir "$WORK/node-2" \
  --restore-from "$WORK/backups/b1"
ADDRS+=("127.0.0.1:$PORT")
for s in 0 1 2 3; do
  grep -q "restored shard $s from backup .*its log is read from offset [1-9]" "$WORK/server-2.log" ||
    fail "shard $s not restored: $(grep restored "$WORK/server-2.log")"
done
settle
# The first two nodes die; the restored node takes every shard over and serves it.
kill -9 "${NODE_PIDS[@]}"
ADDRS=("${ADDRS[2]}")
settle 1
F=("$FEEDCTL" --server "${ADDRS[0]}")
for sku in "${SKUS[@]}"; do
  want=7
  [ "$sku" = sku-1 ] && want=5
  expect 0 "${F[@]}" --json stock get "$sku"
  echo "$OUT" | grep -q "\"available\":\"$want\"" ||
    fail "$sku on the restored node, after the backup's changes: $OUT"
done
expect 0 "${F[@]}" check --progress off
[ "$(echo "$OUT" | grep -c 'every invariant holds')" = 4 ] || fail "feedctl check: $OUT"
echo "cluster backup and restore: ok"

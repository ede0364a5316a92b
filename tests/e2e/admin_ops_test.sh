#!/usr/bin/env bash
# End-to-end: the operator's store operations with the real binaries. `feedctl check` and
# `feedctl backup` against a running server (human and --json output, exit codes, refused
# names), `feed-server --check` on the stopped store, `feed-server --restore-from` into a new
# data dir (the data is there, the audit is clean, a new store id), and a restore into a
# non-empty folder refused.
#
# Usage: admin_ops_test.sh FEED_SERVER FEEDCTL
set -u
SERVER_BIN="$1" FEEDCTL="$2"
WORK="$(mktemp -d /tmp/admin-ops-test-XXXXXX)"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
F="$FEEDCTL"

start_server "$WORK/server.log" --data-dir "$WORK/data" --backup-dir "$WORK/backups"
export FEEDCTL_SERVER="127.0.0.1:$PORT"
for i in $(seq 1 20); do expect 0 "$F" stock adjust "sku-$i" 50 --set; done
for i in $(seq 1 10); do expect 0 "$F" reservation create "sku-$i:2" --id "r-$i"; done
expect 0 "$F" reservation commit r-1

expect 0 "$F" check --progress off
[[ "$OUT" == "store as of sequence 31: 20 levels, 9 open holds,"*"every invariant holds" ]] || fail "check: $OUT"
expect 0 "$F" --json check --progress off
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["violationCount"]=="0" and r["holdsChecked"]=="9", r' "$OUT" || fail "check --json: $OUT"

expect 0 "$F" backup --to nightly --progress off
[[ "$OUT" == "backup of store "*" up to sequence 31 "*"in $WORK/backups/nightly: "*" files, "* ]] || fail "backup: $OUT"
[ -f "$WORK/backups/nightly/BACKUP-MANIFEST.json" ] || fail "no manifest"
expect 2 "$F" backup --to nightly --progress off
[[ "$ERR" == *"ALREADY_EXISTS"*"exists already"* ]] || fail "backup twice: $ERR"
expect 2 "$F" backup --to "a/b" --progress off
[[ "$ERR" == *"INVALID_ARGUMENT: name: '/' is not allowed"* ]] || fail "backup bad name: $ERR"
expect 1 "$F" backup                                   # --to is required
# Stock as of a past sequence (the server keeps delivered events: --event-retention-ms).
expect 0 "$F" stock get sku-1 --as-of 1
[[ "$OUT" == "sku-1 @ default: on_hand 50, reserved 0, available 50"* ]] || fail "as of 1: $OUT"
expect 0 "$F" stock get sku-1 --as-of 21
[[ "$OUT" == "sku-1 @ default: on_hand 50, reserved 2, available 48"* ]] || fail "as of 21: $OUT"
expect 2 "$F" stock get sku-1 --as-of 999
[[ "$ERR" == *"OUT_OF_RANGE: as_of_sequence: 999 is after the last committed sequence 31"* ]] || fail "as of 999: $ERR"
# After the backup: changes the restore must not have.
expect 0 "$F" stock adjust sku-1 999 --set
STORE_ID="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["store_id"])' "$WORK/backups/nightly/BACKUP-MANIFEST.json")"
stop_server

# The stopped store, audited offline.
expect 0 "$SERVER_BIN" --check --data-dir "$WORK/data"
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["violation_count"]=="0" and r["levels_checked"]=="20", r' "$OUT" || fail "--check: $OUT"
expect 2 "$SERVER_BIN" --check --data-dir "$WORK/nowhere/at/all"

# Restore into a new data dir and serve it: the state as of the backup, a new store id.
start_server "$WORK/server-restored.log" --data-dir "$WORK/restored" --restore-from "$WORK/backups/nightly"
grep -q "restored backup $WORK/backups/nightly (store $STORE_ID, up to sequence 31" "$WORK/server-restored.log" || fail "no restore line: $(cat "$WORK/server-restored.log")"
export FEEDCTL_SERVER="127.0.0.1:$PORT"
expect 0 "$F" stock get sku-1 sku-2
[[ "$OUT" == *"sku-1 @ default: on_hand 48, reserved 0, available 48"* ]] || fail "restored sku-1: $OUT"
[[ "$OUT" == *"sku-2 @ default: on_hand 50, reserved 2, available 48"* ]] || fail "restored sku-2: $OUT"
expect 0 "$F" reservation get r-5
[[ "$OUT" == "r-5 HELD: 2 x sku-5 @ default,"* ]] || fail "restored r-5: $OUT"
expect 0 "$F" check --progress off
expect 0 "$F" --json stock adjust sku-1 1 --set
stop_server
grep -q "store id $STORE_ID" "$WORK/server-restored.log" && fail "the restored store kept the old store id"

# A restore into a folder that is not empty is refused, and nothing starts.
"$SERVER_BIN" --listen "127.0.0.1:$(free_port)" --http-listen "" --metrics-listen "" \
  --data-dir "$WORK/restored" --restore-from "$WORK/backups/nightly" >"$WORK/server-refused.log" 2>&1
[ $? = 1 ] || fail "a restore into a non-empty folder should exit 1"
grep -q "is not empty" "$WORK/server-refused.log" || fail "refusal: $(cat "$WORK/server-refused.log")"
# --log-format json: every line of the process is one JSON object (a shipper parses them
# all), the server's own lines with "msg" and the access log's with its fields.
LOG_RPCS=true start_server "$WORK/server-json.log" --data-dir "$WORK/json-data" --log-format json
expect 0 "$F" --server "127.0.0.1:$PORT" stock adjust sku-1 5 --set
stop_server
python3 - "$WORK/server-json.log" <<'PY' || fail "json log: $(head -c 600 "$WORK/server-json.log")"
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
assert all({"ts", "level", "logger"} <= l.keys() for l in lines), "a line without ts/level/logger"
assert any("msg" in l and "listening on" in l["msg"] for l in lines), "no startup line"
assert any(l["logger"] == "rpc" and "msg" not in l for l in lines), "no access line"
assert any(l["logger"] != "rpc" and "msg" in l for l in lines if l["logger"] != "feed"), "no module line"
PY
echo "admin_ops_test: ok"

#!/usr/bin/env bash
# End-to-end: feedctl against the real feed-server binary. Every command group, human and
# --json output, the exit codes scripts rely on (0 ok, 1 usage, 2 rejected with the gRPC code,
# 3 unavailable), a CSV import of 5,000 lines (a re-run applies nothing twice; invalid lines
# are named and nothing is sent), the export, shell completion, and TLS with a client
# certificate and a token.
#
# Usage: feedctl_test.sh FEED_SERVER FEEDCTL REPO_DIR
set -u
SERVER_BIN="$1" FEEDCTL="$2" REPO="$3"
WORK="$(mktemp -d /tmp/feedctl-test-XXXXXX)"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start_server "$WORK/server.log" --data-dir "$WORK/data"
export FEEDCTL_SERVER="127.0.0.1:$PORT"
F="$FEEDCTL"

# Stock.
expect 0 "$F" stock adjust sku-1 10 --set --reason "count" --key adj-1
[[ "$OUT" == "sku-1 @ default: on_hand 10, reserved 0, available 10"* ]] || fail "adjust: $OUT"
expect 0 "$F" stock adjust sku-1 10 --set --reason "count" --key adj-1
[[ "$OUT" == *"(replayed)" ]] || fail "a retried adjust is not replayed: $OUT"
expect 0 "$F" stock adjust sku-2 5 --location wh-2
expect 0 "$F" --json stock get sku-1 sku-2 sku-9
python3 - "$OUT" <<'PY' || fail "get --json: $OUT"
import json, sys
r = json.loads(sys.argv[1])
levels = {(l["sku"], l["location"]): l for l in r["levels"]}
assert levels[("sku-1", "default")]["onHand"] == "10", r
assert levels[("sku-2", "wh-2")]["available"] == "5", r
assert r["missing"] == [{"sku": "sku-9", "location": ""}], r
PY

# Reservations: create, commit, release, get; the codes of what the server refuses.
expect 0 "$F" --json reservation create sku-1:3 sku-2:1@wh-2 --key r-1 --ttl-ms 60000
R1="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["reservation"]["reservationId"])' "$OUT")"
expect 0 "$F" reservation create sku-1:2
R2="$(echo "$OUT" | cut -d' ' -f1)"
[[ "$OUT" == "$R2 HELD: 2 x sku-1 @ default, expires at "* ]] || fail "reservation create: $OUT"
expect 0 "$F" reservation commit "$R1"
[[ "$OUT" == "$R1 COMMITTED: 3 x sku-1 @ default, 1 x sku-2 @ wh-2" ]] || fail "commit: $OUT"
expect 2 "$F" reservation commit "$R1"
[[ "$ERR" == "feedctl: Commit: FAILED_PRECONDITION: reservation '$R1' is already COMMITTED" ]] || fail "commit twice: $ERR"
expect 0 "$F" reservation release "$R2" --reason "changed mind"
expect 0 "$F" reservation get "$R2"
[[ "$OUT" == "$R2 RELEASED: 2 x sku-1 @ default, changed mind" ]] || fail "get: $OUT"
expect 2 "$F" reservation create sku-1:100
[[ "$ERR" == *"FAILED_PRECONDITION: insufficient stock for sku 'sku-1'"* ]] || fail "oversell: $ERR"
expect 2 "$F" reservation get nope
[[ "$ERR" == *"NOT_FOUND"* ]] || fail "get unknown: $ERR"
expect 2 "$F" --json reservation create "sku-1:0"
python3 -c 'import json,sys; e=json.loads(sys.argv[1])["error"]; assert e["code"]=="INVALID_ARGUMENT" and "quantity" in e["message"], e' "$ERR" || fail "json error: $ERR"
expect 1 "$F" reservation create "sku-1"            # not SKU:QUANTITY
expect 1 "$F" reservation                           # a subcommand is required
expect 1 "$F" stock adjust sku-1 ten                # not a number
expect 0 "$F" stock get sku-1
[[ "$OUT" == "sku-1 @ default: on_hand 7, reserved 0, available 7"* ]] || fail "after commit: $OUT"

# Orders: create, follow (in the background), pay, advance to delivered, get, cancel.
expect 0 "$F" --json order create --customer cust-1 --item sku-1 --item sku-1 --total 9.5 --key o-1
O1="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["orderId"])' "$OUT")"
"$F" order follow "$O1" >"$WORK/follow.txt" 2>&1 &
FOLLOW=$!
PIDS+=($FOLLOW)
sleep 0.5
expect 0 "$F" order pay "$O1" --reference pay-1
expect 0 "$F" order advance "$O1" packing
expect 0 "$F" order advance "$O1" DISPATCHED --details "truck 7"
expect 2 "$F" order advance "$O1" packing
[[ "$ERR" == *"FAILED_PRECONDITION"* ]] || fail "advance backwards: $ERR"
expect 0 "$F" order advance "$O1" delivered
for _ in $(seq 1 50); do kill -0 "$FOLLOW" 2>/dev/null || break; sleep 0.1; done
kill -0 "$FOLLOW" 2>/dev/null && fail "order follow did not end at DELIVERED"
wait "$FOLLOW" || fail "order follow exited $?"
grep -q "$O1 CONFIRMED" "$WORK/follow.txt" && grep -q "$O1 PAID" "$WORK/follow.txt" &&
  grep -q "$O1 DISPATCHED: truck 7" "$WORK/follow.txt" && grep -q "$O1 DELIVERED" "$WORK/follow.txt" ||
  fail "follow: $(cat "$WORK/follow.txt")"
expect 0 "$F" order get "$O1"
[[ "$OUT" == "$O1 DELIVERED for cust-1: 2 x sku-1 @ default; total 9.50"* ]] || fail "order get: $OUT"
expect 0 "$F" order create --customer cust-2 --line sku-2:2@wh-2
O2="$(echo "$OUT" | cut -d' ' -f1)"
expect 0 "$F" order cancel "$O2" --reason "fraud check"
[[ "$OUT" == "$O2 CANCELLED"* ]] || fail "cancel: $OUT"

# Bulk import: 5,000 lines; the same file again applies nothing twice; invalid lines.
python3 - "$WORK/counts.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("sku,location,quantity,reason\n")
    for i in range(5000):
        f.write(f"imp-{i:05d},wh-1,{i % 97},cycle count\n")
PY
expect 0 "$F" stock import "$WORK/counts.csv" --progress on
[[ "$ERR" == *"5000/5000 lines"* ]] || fail "no progress bar: $ERR"
[[ "$ERR" == *"5000 lines: 5000 applied, 0 already applied before (replayed), 0 failed" ]] || fail "import: $ERR"
expect 0 "$F" --json stock import "$WORK/counts.csv"
python3 -c 'import json,sys; s=json.loads(sys.argv[1]); assert s["replayed"]==5000 and s["applied"]==0, s' "$OUT" || fail "re-run: $OUT"
expect 0 "$F" stock get imp-04999
[[ "$OUT" == "imp-04999 @ wh-1: on_hand $((4999 % 97)), reserved 0, available $((4999 % 97)) (version 1,"* ]] || fail "imported level: $OUT"
# Receipts (delta): a re-run after a failure half-way applies each line once.
printf 'sku,location,quantity\nrcv-1,wh-1,5\nrcv-1,wh-1,5\nrcv-2,wh-1,3\n' >"$WORK/receipts.csv"
expect 0 "$F" stock import "$WORK/receipts.csv" --mode delta
expect 0 "$F" stock import "$WORK/receipts.csv" --mode delta
expect 0 "$F" stock get rcv-1
[[ "$OUT" == "rcv-1 @ wh-1: on_hand 10,"* ]] || fail "two equal receipts are two, re-run is none: $OUT"
printf 'sku,location,quantity\nok-1,wh,1\nbad,wh,many\n,wh,2\n' >"$WORK/bad.csv"
expect 1 "$F" stock import "$WORK/bad.csv"
[[ "$ERR" == *"line 3: INVALID_LINE: quantity 'many' is not a whole number"* ]] || fail "bad line: $ERR"
[[ "$ERR" == *"line 4: INVALID_LINE: sku is empty"* ]] || fail "bad line 4: $ERR"
expect 0 "$F" stock get ok-1                         # nothing was sent
[ "$OUT" = "ok-1 @ (any): no stock level" ] || fail "a line of a refused file was sent: $OUT"
expect 2 "$F" stock import "$WORK/bad.csv" --skip-invalid --errors "$WORK/errors.csv"
[ "$(sed -n 2p "$WORK/errors.csv")" = "3,INVALID_LINE,quantity 'many' is not a whole number" ] || fail "errors file: $(cat "$WORK/errors.csv")"
expect 0 "$F" stock get ok-1
printf 'sku,location,quantity\nneg,wh,-5\n' >"$WORK/neg.csv"
expect 2 "$F" stock import "$WORK/neg.csv" --mode delta
[[ "$ERR" == *"line 2: FAILED_PRECONDITION: adjustment would make on_hand of sku 'neg'"* ]] || fail "server-side refusal: $ERR"

# Export: every level, one consistent cut, as CSV.
expect 0 "$F" stock export -o "$WORK/export.csv"
[ "$(head -1 "$WORK/export.csv")" = "sku,location,on_hand,reserved,available,allow_backorder,version,sequence" ] || fail "export header"
[ "$(grep -c '^imp-' "$WORK/export.csv")" = 5000 ] || fail "export: $(wc -l <"$WORK/export.csv") lines"
grep -q '^sku-1,default,5,0,5,false,' "$WORK/export.csv" || fail "export sku-1: $(grep '^sku-1' "$WORK/export.csv")"
expect 0 "$F" stock watch --once sku-1
[[ "$OUT" == *"sku-1"*"default"*" 5 "* ]] || fail "watch --once: $OUT"

# Unavailable: nothing listens.
expect 3 "$F" --server "127.0.0.1:$(free_port)" --timeout-ms 2000 stock get sku-1
[[ "$ERR" == *"UNAVAILABLE"* ]] || fail "unavailable: $ERR"

# Shell completion: the script loads in bash and completes commands and options.
"$F" completion bash >"$WORK/complete.bash" || fail "completion bash"
bash -c "source '$WORK/complete.bash'
  COMP_WORDS=(feedctl sto); COMP_CWORD=1; _feedctl; [ \"\${COMPREPLY[*]}\" = stock ] || exit 1
  COMP_WORDS=(feedctl stock im); COMP_CWORD=2; _feedctl; [ \"\${COMPREPLY[*]}\" = import ] || exit 2
  COMP_WORDS=(feedctl stock import f.csv --mo); COMP_CWORD=4; _feedctl; [ \"\${COMPREPLY[*]}\" = --mode ] || exit 3" ||
  fail "bash completion ($?)"
"$F" completion zsh | grep -q bashcompinit || fail "completion zsh"

# TLS with a client certificate and a token: without them the calls are refused.
"$REPO/compose/dev-certs.sh" "$WORK/certs" 2>/dev/null || fail "dev-certs.sh"
C="$WORK/certs"
TOKEN="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
echo "$TOKEN ops stock:read stock:adjust stock:reserve orders:read orders:write" >"$WORK/tokens.txt"
start_server "$WORK/server-tls.log" --data-dir "$WORK/data-tls" \
  --tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key" --tls-client-ca-file "$C/ca.crt" \
  --auth-token-file "$WORK/tokens.txt"
export FEEDCTL_SERVER="localhost:$PORT" FEEDCTL_TLS_CA="$C/ca.crt"
expect 3 "$F" --timeout-ms 3000 stock get sku-1      # no client certificate: the handshake fails
FEEDCTL_TLS_CERT="$C/client.crt" FEEDCTL_TLS_KEY="$C/client.key" expect 2 "$F" stock get sku-1
[[ "$ERR" == *"UNAUTHENTICATED"* ]] || fail "no token: $ERR"
FEEDCTL_TLS_CERT="$C/client.crt" FEEDCTL_TLS_KEY="$C/client.key" FEEDCTL_TOKEN="$TOKEN" \
  expect 0 "$F" stock adjust tls-sku 4 --set
[[ "$OUT" == "tls-sku @ default: on_hand 4,"* ]] || fail "over TLS: $OUT"
expect 0 "$F" --tls-cert "$C/client.crt" --tls-key "$C/client.key" --token "$TOKEN" stock get tls-sku
expect 1 "$F" --tls-cert "$C/client.crt" stock get tls-sku   # a certificate without its key
echo "feedctl_test: ok"

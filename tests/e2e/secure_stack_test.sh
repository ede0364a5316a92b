#!/usr/bin/env bash
# End-to-end: the README's secure stack, with the feed-server binary: development
# certificates from compose/dev-certs.sh, mutual TLS, a static token file, the README's
# grpcurl / curl / grpc-health-probe commands, metrics behind basic authentication,
# --require-secure, and no secret anywhere in the server's log.
#
# Usage: secure_stack_test.sh FEED_SERVER_BINARY REPO_DIR
set -eu
SERVER_BIN="$1"
REPO="$2"
export PATH="$REPO/.cache/gobin:$PATH"
WORK="$(mktemp -d /tmp/feed-secure-XXXXXX)"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)" MPORT="$(free_port)" HPORT="$(free_port)"
SERVER_PID=""

fail() { echo "FAIL: $*" >&2; [ -f "$WORK/server.log" ] && tail -20 "$WORK/server.log" >&2; exit 1; }
cleanup() {
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The README's set-up, in $WORK.
"$REPO/compose/dev-certs.sh" "$WORK/certs" 2>/dev/null
C="$WORK/certs"
TOKEN="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
READER="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
echo "$TOKEN checkout stock:read stock:reserve stock:adjust orders:read orders:write" >"$WORK/tokens.txt"
echo "$READER dashboard stock:read" >>"$WORK/tokens.txt"
chmod 600 "$WORK/tokens.txt"
echo "prometheus:scrape-$TOKEN" >"$WORK/metrics-users.txt"

# --require-secure refuses a start without TLS or authentication, naming what is missing.
if "$SERVER_BIN" --require-secure true --data-dir "$WORK/refused" --listen "127.0.0.1:$PORT" \
  --http-listen "" --metrics-listen "" >"$WORK/refused.log" 2>&1; then
  fail "--require-secure started without TLS and authentication"
fi
grep -q "require-secure: refusing to start without TLS" "$WORK/refused.log" || fail "refusal: $(cat "$WORK/refused.log")"

ADDR="localhost:$PORT"
H="https://localhost:$HPORT"
"$SERVER_BIN" --require-secure true --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" \
  --http-listen "127.0.0.1:$HPORT" --metrics-listen "127.0.0.1:$MPORT" \
  --metrics-basic-auth-file "$WORK/metrics-users.txt" \
  --tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key" --tls-client-ca-file "$C/ca.crt" \
  --auth-token-file "$WORK/tokens.txt" >>"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  grep -q "feed-server listening on" "$WORK/server.log" && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited at start"
  sleep 0.1
done
grep -q "with mutual TLS" "$WORK/server.log" || fail "not listening with mutual TLS"

MTLS=(-cacert "$C/ca.crt" -cert "$C/client.crt" -key "$C/client.key")
CURL=(curl -s --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/client.key")

# Health and reflection need no token (mTLS still does).
grpc-health-probe -addr="$ADDR" -tls -tls-ca-cert "$C/ca.crt" -tls-client-cert "$C/client.crt" \
  -tls-client-key "$C/client.key" >/dev/null 2>&1 || fail "health probe over mTLS"
grpcurl "${MTLS[@]}" "$ADDR" list | grep -q inventory.v1.InventoryService || fail "reflection"
grpcurl -plaintext "127.0.0.1:$PORT" list >/dev/null 2>&1 && fail "plaintext accepted"
grpcurl -cacert "$C/ca.crt" "$ADDR" list >/dev/null 2>&1 && fail "mTLS without a client certificate accepted"

# The README's calls.
grpcurl "${MTLS[@]}" -H "authorization: Bearer $TOKEN" \
  -d '{"sku":"sku-101","mode":"ADJUST_MODE_SET","quantity":10}' \
  "$ADDR" inventory.v1.InventoryService/AdjustStock | grep -q '"on_hand": "10"' || fail "adjust"
grpcurl "${MTLS[@]}" -H "authorization: Bearer $TOKEN" -d '{"keys":[{"sku":"sku-101"}]}' \
  "$ADDR" inventory.v1.InventoryService/GetStock | grep -q '"available": "10"' || fail "get stock"
out="$(grpcurl "${MTLS[@]}" -d '{"keys":[{"sku":"sku-101"}]}' "$ADDR" \
  inventory.v1.InventoryService/GetStock 2>&1 || true)"
echo "$out" | grep -q "Unauthenticated" || fail "no token: $out"
out="$(grpcurl "${MTLS[@]}" -H "authorization: Bearer $READER" \
  -d '{"sku":"sku-101","mode":"ADJUST_MODE_SET","quantity":0}' "$ADDR" \
  inventory.v1.InventoryService/AdjustStock 2>&1 || true)"
echo "$out" | grep -q "PermissionDenied" && echo "$out" | grep -q "stock:adjust" || fail "reader adjust: $out"
"${CURL[@]}" -H "authorization: Bearer $TOKEN" "$H/v1/stock?sku=sku-101" | grep -q '"onHand":"10"' ||
  fail "https stock"
head="$("${CURL[@]}" -i "$H/v1/stock?sku=sku-101")"
echo "$head" | grep -q "^HTTP/1.1 401" && echo "$head" | grep -qi "^WWW-Authenticate: Bearer" ||
  fail "https without token: $head"
head="$("${CURL[@]}" -i -H "authorization: Bearer $READER" -XPOST "$H/v1/stock:adjust" \
  -d '{"sku":"sku-101","mode":"ADJUST_MODE_SET","quantity":0}')"
echo "$head" | grep -q "^HTTP/1.1 403" && echo "$head" | grep -q 'insufficient_scope' ||
  fail "https reader adjust: $head"

# Metrics ask for basic authentication.
M="http://127.0.0.1:$MPORT/metrics"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$M")" = 401 ] || fail "metrics without credentials"
curl -sf -u "prometheus:scrape-$TOKEN" "$M" | grep -q feed_rpc_calls_total || fail "metrics with credentials"

# Who changed the stock is in the access log; no token, password or key is anywhere in it.
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "exit code after SIGTERM"
SERVER_PID=""
grep -q "method=inventory.v1.InventoryService/AdjustStock.*subject=checkout" "$WORK/server.log" ||
  fail "no subject in the access log"
for secret in "$TOKEN" "$READER" "scrape-$TOKEN" "$(sed -n 2p "$C/server.key")" "$(sed -n 2p "$C/client.key")"; do
  if grep -qF -- "$secret" "$WORK/server.log"; then fail "a secret is in the server log"; fi
done
echo "secure stack: OK"

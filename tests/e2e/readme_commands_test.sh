#!/usr/bin/env bash
# End-to-end: the feed-server binary with a real RocksDB and the real Kafka broker, driven
# by the same grpcurl / grpc-health-probe / kcat / curl commands the README shows. Also checks the
# graceful shutdown (SIGTERM -> exit 0) and that a restart keeps the data.
#
# Usage: readme_commands_test.sh FEED_SERVER_BINARY REPO_DIR
set -eu  # no pipefail: "cmd | grep -q" must not fail on SIGPIPE
SERVER_BIN="$1"
REPO="$2"
export PATH="$REPO/.cache/gobin:$PATH"
WORK="$(mktemp -d /tmp/feed-e2e-XXXXXX)"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)" MPORT="$(free_port)" HPORT="$(free_port)"
ADDR="127.0.0.1:$PORT"
TOPIC_SUFFIX="e2e$RANDOM$$"
SERVER_PID=""

fail() { echo "FAIL: $*" >&2; [ -f "$WORK/server.log" ] && tail -20 "$WORK/server.log" >&2; exit 1; }
cleanup() {
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

KAFKA_ARGS=()
if BROKERS="$("$REPO/compose/kafka.sh" status 2>/dev/null)"; then
  KAFKA_ARGS=(--kafka-brokers "$BROKERS"
    --kafka-stock-topic "stock.$TOPIC_SUFFIX"
    --kafka-order-status-topic "status.$TOPIC_SUFFIX"
    --kafka-receipt-topic "receipts.$TOPIC_SUFFIX")
else
  echo "e2e: no Kafka broker running; the Kafka checks are skipped" >&2
fi

start_server() {
  "$SERVER_BIN" --listen "$ADDR" --data-dir "$WORK/data" --metrics-listen "127.0.0.1:$MPORT" \
    --http-listen "127.0.0.1:$HPORT" \
    "${KAFKA_ARGS[@]}" >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    grep -q "feed-server listening on $ADDR" "$WORK/server.log" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited at start"
    sleep 0.1
  done
  fail "server did not start"
}

start_server
# Like the README: grpcurl learns the contracts through server reflection.
call() { grpcurl -plaintext "$@"; }

# Health and reflection.
grpc-health-probe -addr="$ADDR" >/dev/null 2>&1 || fail "health probe"
grpcurl -plaintext "$ADDR" list | grep -q inventory.v1.InventoryService || fail "reflection list"

# Stock, reserve, read.
call -d '{"sku":"sku-101","mode":"ADJUST_MODE_SET","quantity":10,"reason":"receipt PO-1"}' \
  "$ADDR" inventory.v1.InventoryService/AdjustStock | grep -q '"on_hand": "10"' || fail "adjust"
out="$(call -H 'idempotency-key: checkout-42' \
  -d '{"lines":[{"sku":"sku-101","quantity":2}],"ttlMs":60000}' \
  "$ADDR" inventory.v1.InventoryService/Reserve)"
echo "$out" | grep -q RESERVATION_STATE_HELD || fail "reserve: $out"
again="$(call -H 'idempotency-key: checkout-42' \
  -d '{"lines":[{"sku":"sku-101","quantity":2}],"ttlMs":60000}' \
  "$ADDR" inventory.v1.InventoryService/Reserve)"
echo "$again" | grep -q '"replayed": true' || fail "idempotent replay: $again"
call -d '{"keys":[{"sku":"sku-101"}]}' "$ADDR" inventory.v1.InventoryService/GetStock |
  grep -q '"available": "8"' || fail "get stock"
bad="$(call -d '{"lines":[{"sku":"sku-101","quantity":0}]}' "$ADDR" \
  inventory.v1.InventoryService/Reserve 2>&1 || true)"
echo "$bad" | grep -q "lines\[0\].quantity" || fail "bad input message: $bad"

# WatchStock: snapshot, then a change made while watching.
(call -max-time 3 -d '{"keys":[{"sku":"sku-101"}]}' "$ADDR" inventory.v1.InventoryService/WatchStock \
  >"$WORK/watch.out" 2>&1 || true) &
WATCH=$!
sleep 1
call -d '{"lines":[{"sku":"sku-101","quantity":1}]}' "$ADDR" inventory.v1.InventoryService/Reserve >/dev/null
wait "$WATCH"
grep -q KIND_SNAPSHOT_END "$WORK/watch.out" || fail "watch snapshot: $(cat "$WORK/watch.out")"
grep -q KIND_CHANGE "$WORK/watch.out" || fail "watch change: $(cat "$WORK/watch.out")"

# Orders: create, stream, pay, advance to delivered.
order="$(call -d '{"customer_id":"cust-441","item_ids":["sku-101","sku-101"],"total_amount":149.99}' \
  "$ADDR" order.v1.OrderService/CreateOrder)"
echo "$order" | grep -q '"status": "CONFIRMED"' || fail "create order: $order"
ORDER_ID="$(echo "$order" | sed -n 's/.*"order_id": "\([^"]*\)".*/\1/p')"
(call -max-time 5 -d "{\"order_id\":\"$ORDER_ID\"}" "$ADDR" order.v1.OrderService/StreamOrderUpdates \
  >"$WORK/order.out" 2>&1 || true) &
STREAM=$!
sleep 0.5
call -d "{\"order_id\":\"$ORDER_ID\",\"payment_reference\":\"pay-1\"}" "$ADDR" order.v1.OrderService/PayOrder >/dev/null
for stage in PACKING DISPATCHED DELIVERED; do
  call -d "{\"order_id\":\"$ORDER_ID\",\"target\":\"ORDER_STATUS_$stage\"}" "$ADDR" \
    order.v1.OrderService/AdvanceOrder >/dev/null
done
wait "$STREAM"
for s in CONFIRMED PAID PACKING DISPATCHED DELIVERED; do
  grep -q "\"status\": \"$s\"" "$WORK/order.out" || fail "order stream lacks $s: $(cat "$WORK/order.out")"
done

# The HTTP/JSON gateway, with the README's curl commands.
H="http://127.0.0.1:$HPORT"
curl -sf "$H/healthz" | grep -q SERVING || fail "http health"
curl -sf -XPOST "$H/v1/stock:adjust" -d '{"sku":"sku-201","mode":"ADJUST_MODE_SET","quantity":10}' |
  grep -q '"onHand":"10"' || fail "http adjust"
head="$(curl -si -XPOST "$H/v1/reservations" -H 'Idempotency-Key: checkout-43' \
  -d '{"lines":[{"sku":"sku-201","quantity":2}],"ttlMs":60000}')"
echo "$head" | grep -q "^HTTP/1.1 201" || fail "http reserve: $head"
RSV="$(echo "$head" | tr -d '\r' | sed -n 's|^Location: /v1/reservations/||p')"
[ -n "$RSV" ] || fail "http reserve Location: $head"
curl -si -XPOST "$H/v1/reservations" -H 'Idempotency-Key: checkout-43' \
  -d '{"lines":[{"sku":"sku-201","quantity":2}],"ttlMs":60000}' | grep -qi '^Idempotent-Replayed: true' ||
  fail "http idempotent replay"
curl -sf -XPOST "$H/v1/reservations/$RSV:commit" -d '{}' | grep -q '"onHand":"8"' || fail "http commit"
curl -sf "$H/v1/stock?sku=sku-201&sku=sku-202" | grep -q '"missing":\[{"sku":"sku-202"' || fail "http stock"
bad="$(curl -s -XPOST "$H/v1/reservations" -d '{"lines":[{"sku":"sku-201","quantity":0}]}')"
echo "$bad" | grep -q '"code":3' && echo "$bad" | grep -q 'lines\[0\].quantity' || fail "http bad input: $bad"
HORDER="$(curl -sf -XPOST "$H/v1/orders" -d '{"customer_id":"cust-441","item_ids":["sku-201"],"total_amount":49.99}' |
  sed -n 's/.*"orderId":"\([^"]*\)".*/\1/p')"
[ -n "$HORDER" ] || fail "http create order"
curl -sf "$H/v1/orders/$HORDER" | grep -q ORDER_STATUS_CONFIRMED || fail "http get order"
curl -sN --max-time 2 "$H/v1/stock:watch?sku=sku-201" >"$WORK/ndjson.out" 2>/dev/null || true
grep -q '^{"result":{"kind":"KIND_SNAPSHOT_END"' "$WORK/ndjson.out" || fail "http ndjson watch: $(cat "$WORK/ndjson.out")"
curl -sN --max-time 2 -H 'Accept: text/event-stream' "$H/v1/stock:watch?sku=sku-201" >"$WORK/sse.out" 2>/dev/null || true
LAST_ID="$(sed -n 's/^id: //p' "$WORK/sse.out" | tail -1)"
[ -n "$LAST_ID" ] || fail "http sse watch: $(cat "$WORK/sse.out")"
curl -sf -XPOST "$H/v1/stock:adjust" -d '{"sku":"sku-201","mode":"ADJUST_MODE_DELTA","quantity":1}' >/dev/null
curl -sN --max-time 2 -H 'Accept: text/event-stream' -H "Last-Event-ID: $LAST_ID" \
  "$H/v1/stock:watch?sku=sku-201" >"$WORK/sse2.out" 2>/dev/null || true
grep -q "^id: $((LAST_ID + 1))$" "$WORK/sse2.out" && ! grep -q SNAPSHOT "$WORK/sse2.out" ||
  fail "http sse resume after $LAST_ID: $(cat "$WORK/sse2.out")"
curl -sN --max-time 2 "$H/v1/orders/$HORDER/updates" | grep -q ORDER_STATUS_CONFIRMED || fail "http order updates"
curl -sf "$H/openapi.json" | grep -q '"/v1/reservations"' || fail "openapi"
curl -sf "$H/swaggerui/" | grep -q swagger-ui || fail "swagger ui"

# Metrics.
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics.out" || fail "metrics"
grep -q 'feed_rpc_calls_total{code="OK",method="inventory.v1.InventoryService/Reserve"}' "$WORK/metrics.out" ||
  fail "metrics: rpc calls"
grep -q 'feed_http_requests_total{route="POST /v1/reservations",status="201"} 2' "$WORK/metrics.out" ||
  fail "metrics: http requests: $(grep feed_http_requests_total "$WORK/metrics.out")"
# The access log has one line per HTTP request.
grep -q 'method=POST path=/v1/reservations status=201 duration_us=[0-9]* bytes=[0-9]* peer=127.0.0.1:' \
  "$WORK/server.log" || fail "http access log"

# Kafka: the events reach the topics.
if [ ${#KAFKA_ARGS[@]} -gt 0 ]; then
  for _ in $(seq 1 50); do
    n="$(kcat -b "$BROKERS" -C -t "stock.$TOPIC_SUFFIX" -o beginning -e -q -f '%h\n' 2>/dev/null | grep -c ce_id || true)"
    [ "$n" -ge 5 ] && break
    sleep 0.2
  done
  [ "$n" -ge 5 ] || fail "stock events in Kafka: $n"
  kcat -b "$BROKERS" -C -t "receipts.$TOPIC_SUFFIX" -o beginning -e -q -f '%k\n' 2>/dev/null |
    grep -q "$ORDER_ID" || fail "receipt in Kafka"
  grpc-health-probe -addr="$ADDR" -service=feed.bridge.KafkaRelay >/dev/null 2>&1 || fail "bridge health"
fi

# Graceful shutdown: exit 0, and the data is there after a restart.
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" && rc=0 || rc=$?
SERVER_PID=""
[ "$rc" = 0 ] || fail "exit code after SIGTERM: $rc"
start_server
call -d '{"keys":[{"sku":"sku-101"}]}' "$ADDR" inventory.v1.InventoryService/GetStock |
  grep -q '"on_hand": "8"' || fail "data after restart"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=""
echo "e2e: README commands OK"

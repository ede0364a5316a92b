#!/usr/bin/env bash
# Writes the seed corpora of the fuzzers into tests/fuzz/corpus/<fuzzer>/ (run once; the
# output is checked in). Protobuf inputs are encoded from text format with protoc.
#
#   tests/fuzz/make_corpus.sh
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$REPO/tests/fuzz/corpus"
PROTO="$REPO/proto"

# enc <dir> <name> <op byte in hex or ""> <message type> <proto file> <text>
enc() {
  local dir="$OUT/$1" name="$2" op="$3" type="$4" file="$5" text="$6"
  mkdir -p "$dir"
  {
    if [ -n "$op" ]; then printf "\\x$op"; fi
    printf '%s' "$text" | protoc --encode="$type" -I"$PROTO" -I/usr/include "$file"
  } > "$dir/$name"
}

rm -rf "$OUT"
mkdir -p "$OUT"

# --- fuzz_requests: byte 0 = operation (see Op in fuzz_requests.cc), then the request.
INV=inventory/v1/inventory.proto
ORD=order/v1/order.proto
R=fuzz_requests
enc $R adjust-delta 00 inventory.v1.AdjustStockRequest $INV \
  'sku: "sku-1" mode: ADJUST_MODE_DELTA quantity: 5 reason: "receipt PO-1"'
enc $R adjust-set-new-level 00 inventory.v1.AdjustStockRequest $INV \
  'sku: "sku-9" location: "wh-2" mode: ADJUST_MODE_SET quantity: 7 idempotency_key: "adj-1"'
enc $R adjust-backorder-negative 00 inventory.v1.AdjustStockRequest $INV \
  'sku: "sku-2" mode: ADJUST_MODE_DELTA quantity: -3 allow_backorder: true'
enc $R reserve-two-lines 01 inventory.v1.ReserveRequest $INV \
  'lines { sku: "sku-1" quantity: 2 } lines { sku: "sku-3" location: "wh-2" quantity: 1 } ttl_ms: 60000 idempotency_key: "chk-1"'
enc $R reserve-client-id 01 inventory.v1.ReserveRequest $INV \
  'lines { sku: "sku-2" quantity: 5 } reservation_id: "r-1" order_id: "o-1"'
enc $R reserve-backorder 01 inventory.v1.ReserveRequest $INV \
  'lines { sku: "sku-bo" quantity: 10 } lines { sku: "sku-bo" quantity: 3 }'
enc $R reserve-taken-id 01 inventory.v1.ReserveRequest $INV \
  'lines { sku: "sku-1" quantity: 1 } reservation_id: "@0"'
enc $R commit-recent 02 inventory.v1.CommitRequest $INV 'reservation_id: "@1" idempotency_key: "c-1"'
enc $R commit-seed 02 inventory.v1.CommitRequest $INV 'reservation_id: "r-seed"'
enc $R commit-order-hold 02 inventory.v1.CommitRequest $INV 'reservation_id: "@x"'
enc $R release-recent 03 inventory.v1.ReleaseRequest $INV 'reservation_id: "@2" reason: "changed mind"'
enc $R release-client-id 03 inventory.v1.ReleaseRequest $INV 'reservation_id: "r-1"'
enc $R get-stock 04 inventory.v1.GetStockRequest $INV \
  'keys { sku: "sku-1" location: "default" } keys { sku: "sku-3" } keys { sku: "nope" }'
enc $R create-order-items 05 order.v1.CreateOrderRequest $ORD \
  'customer_id: "cust-441" item_ids: "sku-1" item_ids: "sku-1" total_amount: 149.99'
enc $R create-order-lines 05 order.v1.CreateOrderRequest $ORD \
  'customer_id: "cust-2" lines { sku: "sku-3" location: "wh-2" quantity: 4 } idempotency_key: "ord-k" hold_ttl_ms: 5000'
enc $R pay-order 06 order.v1.PayOrderRequest $ORD 'order_id: "@0" payment_reference: "pay-1"'
enc $R advance-order 07 order.v1.AdvanceOrderRequest $ORD 'order_id: "@0" target: ORDER_STATUS_PACKING'
enc $R cancel-order 08 order.v1.CancelOrderRequest $ORD 'order_id: "@0" reason: "customer asked"'
enc $R watch-keys 09 inventory.v1.WatchStockRequest $INV 'keys { sku: "sku-1" } keys { sku: "sku-3" location: "wh-2" } resume_after_sequence: 1'
enc $R watch-all 09 inventory.v1.WatchStockRequest $INV 'resume_after_sequence: 2'
printf '\xff\x61\xea\x00\x00' > "$OUT/$R/tick-1min"          # 60001 ms
printf '\xff\xc0\xd4\x01\x00' > "$OUT/$R/tick-2min"          # 120000 ms
# Requests that cannot be parsed: a truncated varint, a bad wire type, and strings that are
# not UTF-8 (lines[0].sku of a Reserve, the sku of an AdjustStock, a Feed-less order id).
printf '\x01\xff\xff\xff\xff\x0f' > "$OUT/$R/unparseable-reserve-varint"
printf '\x00\x0f\x01' > "$OUT/$R/unparseable-adjust-wire-type"
printf '\x01\x0a\x06\x0a\x02\xc3\x28\x18\x01' > "$OUT/$R/unparseable-reserve-utf8-sku"
printf '\x00\x0a\x02\xe2\x28\x18\x01\x20\x05' > "$OUT/$R/unparseable-adjust-utf8-sku"
printf '\x06\x0a\x03\xf0\x28\x8c' > "$OUT/$R/unparseable-pay-utf8-order-id"

# --- fuzz_events: binary events and their JSON.
EV=events/v1/events.proto
E=fuzz_events
enc $E stock-changed "" events.v1.Event $EV \
  'event_id: "f0221e55deadbeef-7" sequence: 7 type: "inventory.stock.changed" occurred_at { seconds: 1700000000 nanos: 123000000 } key: "sku-1" stock_changed { level { sku: "sku-1" location: "default" on_hand: 10 reserved: 2 available: 8 version: 3 updated_at_ms: 1700000000123 sequence: 7 } delta_reserved: 2 cause: STOCK_CHANGE_CAUSE_RESERVE reservation_id: "rsv-f0221e-7" }'
enc $E order-status "" events.v1.Event $EV \
  'event_id: "x-9" sequence: 9 type: "order.status.changed" occurred_at { seconds: 1 } key: "ord-1" order_status_changed { order_id: "ord-1" customer_id: "c" status: ORDER_STATUS_PACKING status_name: "PACKING" previous_status: ORDER_STATUS_PAID details: "order progressed" }'
enc $E receipt "" events.v1.Event $EV \
  'sequence: 18446744073709551615 type: "order.receipt" key: "ord-1" receipt { order_id: "ord-1" lines { sku: "a" location: "b" quantity: -9223372036854775808 } total_amount: 149.99 payment_reference: "pay-1" }'
mkdir -p "$OUT/$E"
printf '%s' '{"eventId":"s-1","sequence":"1","type":"inventory.stock.changed","occurredAt":"2023-11-14T22:13:20.123Z","key":"sku-1","stockChanged":{"level":{"sku":"sku-1","location":"default","onHand":"10","available":"10","version":"1","sequence":"1"},"deltaOnHand":"10","cause":"STOCK_CHANGE_CAUSE_ADJUST","reason":"receipt"}}' > "$OUT/$E/json-stock"
printf '%s' '{"sequence":"3","receipt":{"order_id":"o","lines":[{"sku":"a","quantity":"2"}],"totalAmount":"NaN"},"unknownField":[1,{"a":null}]}' > "$OUT/$E/json-receipt"
printf '%s' '{"orderStatusChanged":{"status":3,"previousStatus":"ORDER_STATUS_PAID"},"occurredAt":"9999-12-31T23:59:59.999999999Z"}' > "$OUT/$E/json-order"

# --- fuzz_config: argv tokens, one per line; "%%config-file%%" starts a config file body.
C="$OUT/fuzz_config"
mkdir -p "$C"
printf -- '--listen\n0.0.0.0:50051\n--durability\nasync\n--log-format\njson' > "$C/flags"
printf -- '--help' > "$C/help"
printf -- '--kafka-brokers=127.0.0.1:19092\n--kafka-property\nsecurity.protocol=SSL\n--kafka-property\nlinger.ms=5\n--kafka-value-format\njson' > "$C/kafka"
printf -- '--hold-ttl-ms\n600000\n--max-hold-ttl-ms\n1000' > "$C/ttl-conflict"
printf -- '--max-batch\n0\n--max-lines\n99999999999999999999' > "$C/out-of-range"
printf -- '--config\nx\n%%%%config-file%%%%\nlisten = "10.0.0.1:1"\ndurability = "async"\nkafka-property = ["a=b", "c=d"]\n' > "$C/config-toml"
printf -- '--config=x\n%%%%config-file%%%%\n[default]\nmax-quantity=5\nlog-rpcs=false\n' > "$C/config-ini"

# --- fuzz_store_keys: raw bytes.
K="$OUT/fuzz_store_keys"
mkdir -p "$K"
printf '\x00\x00\x00\x00\x00\x00\x00\x01' > "$K/sequence-1"
printf '\xff\xff\xff\xff\xff\xff\xff\xff' > "$K/sequence-max"
printf '\x00\x00\x01\x8b\xcf\xe5\x68\x00payload' > "$K/timestamped"
printf '\x80\x00\x00\x00\x00\x00\x00\x00\x7f\xff\xff\xff\xff\xff\xff\xff' > "$K/two-values"
printf 'abc' > "$K/short"

find "$OUT" -type f | wc -l | xargs echo "files:"
du -sb "$OUT" | cut -f1 | xargs echo "bytes:"

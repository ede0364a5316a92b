#!/usr/bin/env bash
# Cluster mode over SASL_SSL: one node whose shard log (claims, replicated batches, group
# membership) and relay both reach the SASL_SSL broker of the security tests
# (tests/bridge/sasl_broker.sh) with the server's --kafka-security-* flags. It claims its
# shards, acknowledges a reservation (which needs the shard log's round trip) and relays its
# events; the password is in no log line. A node given a wrong password does not serve: it
# exits with an error that names the shard log, and says nothing of the password.
#
# Usage: cluster_sasl_test.sh FEED_SERVER_BINARY REPO_DIR SASL_BROKER_DIR
set -u
SERVER_BIN="$1"
REPO="$2"
SASL_DIR="$3"
export PATH="$REPO/.cache/gobin:$PATH"
WORK="$(mktemp -d /tmp/feed-cluster-sasl-XXXXXX)"
# shellcheck source=lib.sh
source "$REPO/tests/e2e/lib.sh"
"$REPO/tests/bridge/sasl_broker.sh" status "$SASL_DIR" >/dev/null ||
  fail "no SASL_SSL broker: tests/bridge/sasl_broker.sh start $SASL_DIR"
SASL_BROKERS="127.0.0.1:${BRIDGE_SASL_PORT:-19194}"
PASSWORD="$(cat "$SASL_DIR/sasl.password")"
(umask 077 && cp "$SASL_DIR/sasl.password" "$WORK/password")
SUFFIX="sasl$RANDOM$$"
SECURITY=(--kafka-security-protocol sasl_ssl --kafka-ca-file "$SASL_DIR/certs/ca.crt"
  --kafka-sasl-username "$(cat "$SASL_DIR/sasl.user")")

# A wrong password: the node cannot create or read its shard log, so it does not start.
WRONG="wrong-${PASSWORD:0:6}-password"
(umask 077 && echo "$WRONG" >"$WORK/wrong-password")
timeout 60 "$SERVER_BIN" --listen "127.0.0.1:$(free_port)" --metrics-listen "" \
  --data-dir "$WORK/refused" --cluster-shards 3 --cluster-node-id refused \
  --cluster-brokers "$SASL_BROKERS" --cluster-topic "shard-log.$SUFFIX" \
  --cluster-group "cluster.$SUFFIX" --cluster-log-timeout-ms 5000 "${SECURITY[@]}" \
  --kafka-sasl-password-file "$WORK/wrong-password" >"$WORK/refused.log" 2>&1
RC=$?
[ "$RC" != 0 ] && [ "$RC" != 124 ] || fail "a wrong password: exit $RC, $(tail -3 "$WORK/refused.log")"
grep -q "shard log" "$WORK/refused.log" || fail "the refusal does not name the shard log: $(tail -3 "$WORK/refused.log")"
grep -q "uthentication" "$WORK/refused.log" || fail "the refusal does not say why: $(tail -3 "$WORK/refused.log")"
echo "cluster_sasl_test: a wrong password: exit $RC, $(grep -m1 'shard log' "$WORK/refused.log" | cut -c1-200)"

start_server "$WORK/server.log" --cluster-shards 3 --cluster-node-id sasl-node \
  --data-dir "$WORK/node" --kafka-brokers "$SASL_BROKERS" --cluster-topic "shard-log.$SUFFIX" \
  --cluster-group "cluster.$SUFFIX" --kafka-stock-topic "stock.$SUFFIX" \
  --kafka-order-status-topic "status.$SUFFIX" --kafka-receipt-topic "receipts.$SUFFIX" \
  "${SECURITY[@]}" --kafka-sasl-password-file "$WORK/password"
grep -q "at $SASL_BROKERS over sasl_ssl" "$WORK/server.log" || fail "the node does not say how it reaches the shard log"
for _ in $(seq 1 300); do
  [ "$(grep -c 'serving at epoch' "$WORK/server.log")" -ge 3 ] && break
  sleep 0.1
done
[ "$(grep -c 'serving at epoch' "$WORK/server.log")" -ge 3 ] || fail "the node did not claim its 3 shards"

ADDR="127.0.0.1:$PORT"
expect 0 grpcurl -plaintext -d '{"sku":"sasl-1","quantity":10,"mode":"ADJUST_MODE_SET"}' "$ADDR" \
  inventory.v1.InventoryService/AdjustStock
expect 0 grpcurl -plaintext -d '{"lines":[{"sku":"sasl-1","quantity":2}]}' "$ADDR" \
  inventory.v1.InventoryService/Reserve
echo "$OUT" | grep -q '"reservation_id": "rsv-s' || fail "no cluster reservation: $OUT"
echo "$OUT" | grep -q '"available": "8"' || fail "reserve: $OUT"
# The relay of the shard delivers over the same settings: its outbox drains.
for _ in $(seq 1 200); do
  grep -q "relay: kafka is reachable" "$WORK/server.log" && break
  sleep 0.1
done
grep -q "relay: kafka is reachable" "$WORK/server.log" || fail "the shard's relay did not reach Kafka"
stop_server

for log in "$WORK/server.log" "$WORK/refused.log"; do
  if grep -qF -e "$PASSWORD" -e "$WRONG" "$log"; then fail "a password is in $log"; fi
done
echo "cluster_sasl_test: ok (3 shards claimed, a reservation acknowledged through the shard log over SASL_SSL, no password logged)"

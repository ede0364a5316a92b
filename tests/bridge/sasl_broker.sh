#!/usr/bin/env bash
# The SASL_SSL broker of the bridge's security tests (tests/bridge/sasl_relay_test.cc):
# compose/kafka.sh with a SASL_SSL listener, on its own ports and state dir, so that it never
# meets the plaintext broker of the other tests (19092/19093) or a developer's.
#
# Usage: tests/bridge/sasl_broker.sh start|stop|status DIR
#   DIR/broker         the broker's state (KAFKA_STATE_DIR)
#   DIR/certs          its development certificates (compose/dev-certs.sh; clients: ca.crt)
#   DIR/sasl.user      the SCRAM user, DIR/sasl.password its password (random, made at the
#                      first start, mode 600)
# Env: BRIDGE_SASL_KAFKA_PORT (19192, plaintext), BRIDGE_SASL_CONTROLLER_PORT (19193),
#      BRIDGE_SASL_PORT (19194, SASL_SSL).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cmd="${1:?usage: $0 start|stop|status DIR}"
dir="${2:?usage: $0 start|stop|status DIR}"
mkdir -p "$dir"

if [[ ! -s "$dir/sasl.password" ]]; then
  (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/sasl.password")
fi
echo feed-relay >"$dir/sasl.user"

export KAFKA_PORT="${BRIDGE_SASL_KAFKA_PORT:-19192}"
export KAFKA_CONTROLLER_PORT="${BRIDGE_SASL_CONTROLLER_PORT:-19193}"
export KAFKA_SASL_PORT="${BRIDGE_SASL_PORT:-19194}"
export KAFKA_STATE_DIR="$dir/broker"
export KAFKA_CERTS_DIR="$dir/certs"
export KAFKA_SASL_USER=feed-relay
KAFKA_SASL_PASSWORD="$(cat "$dir/sasl.password")"
export KAFKA_SASL_PASSWORD
# 256m ran out of heap during startup in CI once (SASL + TLS listeners); the default broker uses 512m too.
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"

case "$cmd" in
  start | stop | status) exec "$REPO/compose/kafka.sh" "$cmd" ;;
  *)
    echo "usage: $0 start|stop|status DIR" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# The whole stack on this machine, without Docker: installs what is missing, builds
# feed-server, starts a local Apache Kafka broker (KRaft, compose/kafka.sh) and a local
# Prometheus scraping the server (compose/prometheus.sh, with the repo's recording rules;
# --no-prometheus leaves it out), and runs the server with its data in ./data (RocksDB).
# Ctrl-C stops the server and Prometheus; the broker keeps its data for the next run
# (compose/kafka.sh stop|reset to stop or wipe it).
#
# Any feed-server flag can be appended, e.g. compose/run.sh --durability async
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

PROMETHEUS=1
ARGS=()
for a in "$@"; do
  if [ "$a" = --no-prometheus ]; then PROMETHEUS=""; else ARGS+=("$a"); fi
done

compose/install-deps.sh
BUILD="${BUILD_DIR:-$REPO/build}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j2 --target feed-server feed_openapi feedctl

BROKERS="$(compose/kafka.sh start)"
echo "run: Kafka at $BROKERS" >&2
METRICS="${FEED_METRICS_LISTEN:-127.0.0.1:9464}"
if [ -n "$PROMETHEUS" ]; then
  PROM="$(compose/prometheus.sh start "$METRICS" "${PROMETHEUS_LISTEN:-127.0.0.1:9090}")"
  trap 'compose/prometheus.sh stop' EXIT
  echo "run: Prometheus at http://$PROM (recording rules feed:*; e.g. feed:reservations:rate1m)" >&2
fi
echo "run: feed-server gRPC on 127.0.0.1:50051, HTTP/JSON on 127.0.0.1:8081 (dashboard at /dashboard/, Swagger UI at /swaggerui/), metrics on $METRICS/metrics; the server's 'listening on' line says http or https" >&2
echo "run: feedctl: $BUILD/clients/feedctl/feedctl --help" >&2
# The server gets Ctrl-C from the terminal itself; a TERM sent to this script is passed on.
# Either way Prometheus is stopped once the server has exited.
"$BUILD/feed-server/feed-server" \
  --listen "${FEED_LISTEN:-127.0.0.1:50051}" \
  --data-dir "${FEED_DATA_DIR:-$REPO/data}" \
  --backup-dir "${FEED_BACKUP_DIR:-$REPO/backups}" \
  --metrics-listen "$METRICS" \
  --kafka-brokers "$BROKERS" \
  "${ARGS[@]}" &
SERVER=$!
trap ':' INT
trap 'kill -TERM "$SERVER" 2>/dev/null' TERM
wait "$SERVER" || true
wait "$SERVER" 2>/dev/null || true

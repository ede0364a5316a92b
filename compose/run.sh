#!/usr/bin/env bash
# The whole stack on this machine, without Docker: installs what is missing, builds
# feed-server, starts a local Apache Kafka broker (KRaft, compose/kafka.sh) and runs the
# server with its data in ./data (RocksDB). Ctrl-C stops the server; the broker keeps its
# data for the next run (compose/kafka.sh stop|reset to stop or wipe it).
#
# Any feed-server flag can be appended, e.g. compose/run.sh --durability async
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

compose/install-deps.sh
BUILD="${BUILD_DIR:-$REPO/build}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j2 --target feed-server feed_openapi

BROKERS="$(compose/kafka.sh start)"
echo "run: Kafka at $BROKERS" >&2
echo "run: feed-server gRPC on 127.0.0.1:50051, HTTP/JSON on 127.0.0.1:8081 (Swagger UI at /swaggerui/), metrics on 127.0.0.1:9464/metrics; the server's 'listening on' line says http or https" >&2
exec "$BUILD/feed-server/feed-server" \
  --listen "${FEED_LISTEN:-127.0.0.1:50051}" \
  --data-dir "${FEED_DATA_DIR:-$REPO/data}" \
  --kafka-brokers "$BROKERS" \
  "$@"

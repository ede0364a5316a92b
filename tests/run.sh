#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is missing (apt packages, the
# Kafka broker jars from Maven Central, grpcurl/grpc-health-probe via go install), builds
# everything, starts a local Kafka broker (compose/kafka.sh), runs every CTest test
# (unit, crash, integration, kafka, e2e), stops the broker.
#
# Env: BUILD_DIR (default build), CTEST_ARGS (extra ctest arguments, e.g. "-L unit"),
#      FEED_SANITIZE ("address,undefined" or "thread": a sanitizer build in build-<name>).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

compose/install-deps.sh --go-tools
export PATH="$REPO/.cache/gobin:$PATH"

BUILD="${BUILD_DIR:-$REPO/build}"
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ -n "${FEED_SANITIZE:-}" ]; then
  BUILD="${BUILD_DIR:-$REPO/build-${FEED_SANITIZE//,/-}}"
  CMAKE_ARGS+=(-DFEED_SANITIZE="$FEED_SANITIZE" -DFEED_BUILD_BENCH=OFF)
  # Intercepted libc calls made inside Debian's uninstrumented libraries are not races of ours.
  export TSAN_OPTIONS="suppressions=$REPO/tests/sanitizers/tsan.supp ${TSAN_OPTIONS:-}"
fi
cmake -S . -B "$BUILD" -G Ninja "${CMAKE_ARGS[@]}" >/dev/null
cmake --build "$BUILD" -j2

# Tests of the bridge and the end-to-end tests need a real broker.
compose/kafka.sh start >/dev/null
trap '"$REPO/compose/kafka.sh" stop >/dev/null 2>&1 || true' EXIT

cd "$BUILD"
# shellcheck disable=SC2086
ctest --output-on-failure --timeout 600 ${CTEST_ARGS:-}

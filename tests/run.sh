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
  # Every report of every process (test binaries and the servers they start) goes to a
  # file here; any file left at the end fails the run, even when the process that wrote it
  # was one whose exit status no test looks at.
  REPORTS="$BUILD/sanitizer-reports"
  rm -rf "$REPORTS" && mkdir -p "$REPORTS"
  export ASAN_OPTIONS="log_path=$REPORTS/asan ${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="log_path=$REPORTS/ubsan:print_stacktrace=1 ${UBSAN_OPTIONS:-}"
  if [ "$FEED_SANITIZE" = thread ]; then
    # gRPC, abseil and RocksDB built with TSan (same versions and sonames as Debian's, built
    # once into .cache, about 35 minutes on 2 cores) replace Debian's at run time, so TSan
    # sees the ordering inside them. Libc calls made inside the other, uninstrumented libraries
    # are ignored (tsan.supp).
    tests/sanitizers/build-tsan-deps.sh "$REPO/.cache/tsan-deps"
    export LD_LIBRARY_PATH="$REPO/.cache/tsan-deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export TSAN_OPTIONS="suppressions=$REPO/tests/sanitizers/tsan.supp log_path=$REPORTS/tsan ${TSAN_OPTIONS:-}"
  fi
fi
cmake -S . -B "$BUILD" -G Ninja "${CMAKE_ARGS[@]}" >/dev/null
cmake --build "$BUILD" -j2

# Tests of the bridge and the end-to-end tests need a real broker.
compose/kafka.sh start >/dev/null
trap '"$REPO/compose/kafka.sh" stop >/dev/null 2>&1 || true' EXIT

cd "$BUILD"
# shellcheck disable=SC2086
ctest --output-on-failure --timeout 600 ${CTEST_ARGS:-} && status=0 || status=$?
if [ -n "${REPORTS:-}" ] && [ -n "$(ls -A "$REPORTS")" ]; then
  echo "run.sh: sanitizer reports in $REPORTS:" >&2
  for f in "$REPORTS"/*; do
    echo "== $f" >&2
    head -60 "$f" >&2
  done
  status=1
fi
exit "$status"

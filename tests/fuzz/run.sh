#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz) and runs each one for
# FUZZ_SECONDS on a copy of its corpus. Exits non-zero when any fuzzer finds a crash; the
# crashing inputs are kept in $FUZZ_OUT/<fuzzer>/ (printed at the end).
#
#   tests/fuzz/run.sh                      every fuzzer, 30 s each
#   FUZZ_SECONDS=300 tests/fuzz/run.sh fuzz_requests
#   tests/fuzz/run.sh --merge              ... and copy new interesting inputs back into
#                                          tests/fuzz/corpus/<fuzzer>/ (libFuzzer -merge=1)
#
# Environment: FUZZ_SECONDS (30), FUZZ_JOBS (1: parallel fuzzing processes per fuzzer),
# BUILD_DIR (build-fuzz), FUZZ_OUT (BUILD_DIR/fuzz-out), FUZZ_ARGS (extra libFuzzer flags).
# Reproduce a crash: build-fuzz/tests/<fuzzer> <crash file>
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD_DIR:-$REPO/build-fuzz}"
SECONDS_EACH="${FUZZ_SECONDS:-30}"
JOBS="${FUZZ_JOBS:-1}"
OUT="${FUZZ_OUT:-$BUILD/fuzz-out}"
ALL=(fuzz_requests fuzz_events fuzz_config fuzz_store_keys)

merge=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --merge) merge=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    fuzz_*) targets+=("$arg") ;;
    *) echo "unknown argument: $arg (fuzzers: ${ALL[*]})" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")

# --- clang + libFuzzer (Debian 12: clang 14) -----------------------------------------------
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "== installing clang and libFuzzer"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev
fi

# --- build (only what the fuzzers need) --------------------------------------------------
if [ ! -f "$BUILD/build.ninja" ]; then
  echo "== configuring $BUILD"
  cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DFEED_FUZZ=ON -DFEED_SANITIZE=address,undefined -DFEED_BUILD_BENCH=OFF
fi
echo "== building ${targets[*]}"
nice -n 10 ninja -C "$BUILD" -j "${FUZZ_BUILD_JOBS:-2}" "${targets[@]}"

# --- fuzz ----------------------------------------------------------------------------------
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
failed=()
summary=()
for t in "${targets[@]}"; do
  bin="$BUILD/tests/$t"
  seeds="$REPO/tests/fuzz/corpus/$t"
  work="$OUT/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -r "$seeds/." "$work/corpus/"    # the checked-in corpus only grows with --merge
  echo "== $t: ${SECONDS_EACH}s on a copy of $(ls "$seeds" | wc -l) seeds"
  extra=()
  if [ "$JOBS" -gt 1 ]; then extra+=(-jobs="$JOBS" -workers="$JOBS"); fi
  rc=0
  # shellcheck disable=SC2086
  (cd "$work" && "$bin" "$work/corpus" -max_total_time="$SECONDS_EACH" -timeout=25 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "${extra[@]}" ${FUZZ_ARGS:-}) > "$work/log.txt" 2>&1 || rc=$?
  if [ "$JOBS" -gt 1 ]; then cat "$work"/fuzz-*.log >> "$work/log.txt" 2>/dev/null || true; fi
  # The last status line: executions, coverage, corpus.
  last="$(grep -E '^#[0-9]+' "$work/log.txt" | tail -1 || true)"
  eps="$(grep -E '^stat::average_exec_per_sec' "$work/log.txt" | tail -1 | awk '{print $2}' || true)"
  summary+=("$t: rc=$rc exec/s=${eps:-?} | $last")
  if [ "$rc" -ne 0 ] || ls "$work/artifacts" | grep -qE '^(crash|leak|timeout|oom)-'; then
    failed+=("$t")
    echo "!! $t failed (rc=$rc); log: $work/log.txt"
    grep -E 'ERROR|FUZZ CHECK|SUMMARY|runtime error|Test unit written' "$work/log.txt" | head -20 || true
  fi
  if [ "$merge" = 1 ]; then
    before=$(ls "$seeds" | wc -l)
    "$bin" -merge=1 "$seeds" "$work/corpus" > "$work/merge.txt" 2>&1
    echo "   merged: $before -> $(ls "$seeds" | wc -l) files in $seeds"
  fi
done

echo
echo "== summary (${SECONDS_EACH}s each)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]} (artifacts in $OUT/<fuzzer>/artifacts)"
  exit 1
fi
echo "no crash"

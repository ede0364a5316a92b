#!/usr/bin/env bash
# Instructions per reservation on the in-memory command path, stage by stage, for one or
# more core_bench builds side by side: BM_ApplyInMemory (200,000 unary reservations through
# validate, queue, apply, complete and publish, with a store that discards writes) run under
# valgrind's callgrind, which counts every instruction executed. The count is the same from
# run to run, unlike CPU time on this VM (no hardware counters; CPU time moves 10-20 %
# between runs), so it settles whether a change to the core made it do less.
#
#   bench/instructions.sh CORE_BENCH [CORE_BENCH...]
#
# Each build takes ~3 minutes (callgrind runs ~50x slower); builds run one per core at a
# time. Build an older core_bench in a worktree (cmake --build BUILD --target core_bench).
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,12p "$0" >&2; exit 1; }
if ! command -v valgrind >/dev/null; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends valgrind >&2
fi
WORK="$(mktemp -d /tmp/feed-instructions-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
RESERVATIONS=200000
i=0
for bench in "$@"; do
  i=$((i + 1))
  valgrind --tool=callgrind --callgrind-out-file="$WORK/$i.out" "$bench" \
    --benchmark_filter='BM_ApplyInMemory' >"$WORK/$i.log" 2>&1 &
  # two at a time: one per core
  if [ $((i % 2)) -eq 0 ]; then wait; fi
done
wait
# stage -> the function whose inclusive count is that stage's work
python3 - "$WORK" "$RESERVATIONS" "$@" <<'PY'
import re, subprocess, sys
work, n, benches = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
stages = [("caller (validate, queue)", r"\bDrive\("),
          ("feed-writer (apply)", r"CommitPipeline::WriterLoop\(\)"),
          ("  of which the commands", r"RpcCommand<inventory::v1::ReserveRequest.*::Execute\("),
          ("feed-committer", r"CommitPipeline::CommitterLoop\(\)"),
          ("feed-completer (answer, free)", r"CommitPipeline::CompleterLoop\(\)"),
          ("feed-publisher", r"CommitPipeline::PublisherLoop\(\)")]
cols = []
for i, _ in enumerate(benches, 1):
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", f"{work}/{i}.out"],
                         capture_output=True, text=True).stdout
    total = int(re.search(r"([\d,]+) +\(100\.0+%\) +PROGRAM TOTALS", out).group(1).replace(",", ""))
    row = {"total": total}
    for name, pattern in stages:
        best = 0
        for line in out.splitlines():
            m = re.match(r"\s*([\d,]+) ", line)
            if m and re.search(pattern, line):
                best = max(best, int(m.group(1).replace(",", "")))
        row[name] = best
    cols.append(row)
print("| stage | " + " | ".join(f"`{b}`" for b in benches) + " |")
print("|---|" + "---|" * len(benches))
for name, _ in stages + [("total", None)]:
    print(f"| {name} | " + " | ".join(f"{c[name] / n:,.0f}" for c in cols) + " |")
print(f"\ninstructions per reservation ({n:,} reservations; the total includes start-up and seeding)")
PY

// The run's report: a text summary (stdout, or stderr with --json) and, with --json, one
// JSON line on stdout (what bench/report.py reads).
#pragma once

#include <cstdio>

#include "proc_sample.h"
#include "stats.h"

namespace feed::loadgen {

nlohmann::json CodesJson(const std::array<uint64_t, kNumCodes>& codes, bool skip_ok);

// What main measured around the workers' run.
struct RunFigures {
  Stats total;  // every worker's stats merged
  nlohmann::json seed = nullptr;
  double connect_s = 0;
  int subs_started_at_start = 0;
  int subs_connected_at_start = 0;
  int subs_connected_at_end = 0;
  CpuSample cpu0, cpu1;
  ProcSample proc0, proc1;
};

void Report(const Shared& sh, const RunFigures& run, FILE* report);

}  // namespace feed::loadgen

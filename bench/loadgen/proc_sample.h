// CPU figures of this process, of the server and of the machine, from getrusage and /proc.
#pragma once

#include "loadgen.h"

namespace feed::loadgen {

struct CpuSample {
  double user = 0, sys = 0;
};
// This process's CPU seconds.
CpuSample SelfCpu();

// CPU seconds of a process (all threads) and busy CPU seconds of the whole machine, from /proc.
struct ProcSample {
  double process = -1;       // < 0: unknown
  double machine_idle = -1;  // idle + iowait seconds, summed over the CPUs
  TimePoint at = Clock::now();
};
ProcSample SampleProc(int pid);

}  // namespace feed::loadgen

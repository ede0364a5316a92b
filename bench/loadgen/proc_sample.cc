#include "proc_sample.h"

namespace feed::loadgen {

CpuSample SelfCpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6,
          static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6};
}

ProcSample SampleProc(int pid) {
  ProcSample r;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (pid > 0) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (std::getline(f, line)) {
      auto close = line.rfind(')');
      if (close != std::string::npos) {
        std::istringstream rest(line.substr(close + 2));
        std::string field;
        double utime = 0, stime = 0;
        // Fields 3.. after "pid (comm) "; utime and stime are fields 14 and 15.
        for (int i = 3; i <= 15 && (rest >> field); ++i) {
          if (i == 14) utime = std::strtod(field.c_str(), nullptr);
          if (i == 15) stime = std::strtod(field.c_str(), nullptr);
        }
        r.process = (utime + stime) / tick;
      }
    }
  }
  std::ifstream st("/proc/stat");
  std::string cpu;
  double v[8] = {};
  if (st >> cpu && cpu == "cpu") {
    for (double& x : v) st >> x;
    // user nice system idle iowait irq softirq steal. Busy time is derived from idle + iowait:
    // on a tickless kernel those are measured precisely, user/system are only sampled.
    r.machine_idle = (v[3] + v[4]) / tick;
  }
  r.at = Clock::now();
  return r;
}

}  // namespace feed::loadgen

// At most one log line per period for a repeated problem, so that a flood of bad input or a
// long outage cannot flood the log; the lines left out are counted in the next one.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace feed {

class LogRateLimit {
 public:
  explicit LogRateLimit(std::chrono::milliseconds period) : period_(period) {}

  // True when a line may be written now; *suppressed is then how many were left out since.
  bool Allow(uint64_t* suppressed) {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (logged_ && now - last_ < period_) {
      ++suppressed_;
      return false;
    }
    logged_ = true;
    last_ = now;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

 private:
  const std::chrono::milliseconds period_;
  std::mutex mu_;
  bool logged_ = false;
  std::chrono::steady_clock::time_point last_{};
  uint64_t suppressed_ = 0;
};

}  // namespace feed

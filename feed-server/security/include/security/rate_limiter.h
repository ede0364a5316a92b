// A token bucket per subject: `rate` requests per second on average, bursts up to `burst`.
// Thread-safe. The table is bounded: past max_subjects, subjects whose bucket is full
// (idle long enough to have refilled) are forgotten.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace feed::security {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  RateLimiter(double rate, double burst, size_t max_subjects = 100000);

  // True when `subject` may make one more request now; otherwise `retry_after_s` says
  // when it may.
  bool Allow(std::string_view subject, Clock::time_point now, double* retry_after_s);
  double rate() const { return rate_; }
  double burst() const { return burst_; }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point updated;
  };
  void Refill(Bucket& b, Clock::time_point now) const;

  const double rate_;
  const double burst_;
  const size_t max_subjects_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace feed::security

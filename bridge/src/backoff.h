// Exponential backoff between retries of a failing step. Not thread-safe.
#pragma once

#include <algorithm>
#include <chrono>

namespace feed::bridge::internal {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds max)
      : first_(first), max_(max), next_(first) {}
  std::chrono::milliseconds Next() {
    const std::chrono::milliseconds d = next_;
    next_ = std::min(max_, next_ * 2);
    return d;
  }
  void Reset() { next_ = first_; }

 private:
  std::chrono::milliseconds first_, max_, next_;
};

}  // namespace feed::bridge::internal

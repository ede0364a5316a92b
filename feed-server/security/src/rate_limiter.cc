#include "security/rate_limiter.h"

#include <algorithm>

namespace feed::security {

RateLimiter::RateLimiter(double rate, double burst, size_t max_subjects)
    : rate_(rate), burst_(burst > 0 ? burst : std::max(rate, 1.0)), max_subjects_(max_subjects) {}

void RateLimiter::Refill(Bucket& b, Clock::time_point now) const {
  double elapsed = std::chrono::duration<double>(now - b.updated).count();
  if (elapsed > 0) {
    b.tokens = std::min(burst_, b.tokens + elapsed * rate_);
    b.updated = now;
  }
}

bool RateLimiter::Allow(std::string_view subject, Clock::time_point now, double* retry_after_s) {
  std::lock_guard lock(mu_);
  auto it = buckets_.find(std::string(subject));
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_subjects_) {
      for (auto i = buckets_.begin(); i != buckets_.end();) {
        Refill(i->second, now);
        i = i->second.tokens >= burst_ ? buckets_.erase(i) : std::next(i);
      }
    }
    it = buckets_.emplace(std::string(subject), Bucket{burst_, now}).first;
  }
  Bucket& b = it->second;
  Refill(b, now);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return true;
  }
  if (retry_after_s != nullptr) *retry_after_s = (1 - b.tokens) / rate_;
  return false;
}

}  // namespace feed::security

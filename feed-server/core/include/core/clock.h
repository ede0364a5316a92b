// Time source of the core, injectable so expiry can be tested without sleeping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace feed::core {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch. Thread-safe.
  virtual int64_t NowMillis() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMillis() const override { return now_ms_.load(); }
  void Advance(int64_t ms) { now_ms_.fetch_add(ms); }
  void Set(int64_t ms) { now_ms_.store(ms); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace feed::core

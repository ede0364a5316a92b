// Ctrl-C (SIGINT) and SIGTERM for the commands that run until stopped: the handler only sets a
// flag (nothing else is safe in a signal handler); a helper thread polls it and cancels the
// call in progress from ordinary code.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <thread>

namespace feedctl {

inline std::atomic<bool>& InterruptFlag() {
  static std::atomic<bool> flag{false};
  return flag;
}

// While alive: a signal cancels the registered call (and any registered later).
class CancelOnInterrupt {
 public:
  CancelOnInterrupt() {
    std::signal(SIGINT, [](int) { InterruptFlag() = true; });
    std::signal(SIGTERM, [](int) { InterruptFlag() = true; });
    thread_ = std::thread([this] {
      while (!done_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!InterruptFlag()) continue;
        std::lock_guard lock(mu_);
        if (context_ != nullptr) context_->TryCancel();
      }
    });
  }
  ~CancelOnInterrupt() {
    done_ = true;
    thread_.join();
  }
  // The call to cancel now (null: none).
  void Watch(grpc::ClientContext* context) {
    std::lock_guard lock(mu_);
    context_ = context;
    if (context_ != nullptr && InterruptFlag()) context_->TryCancel();
  }
  static bool Interrupted() { return InterruptFlag(); }

 private:
  std::mutex mu_;
  grpc::ClientContext* context_ = nullptr;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace feedctl

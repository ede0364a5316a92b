// Ctrl-C (SIGINT) and SIGTERM for the commands that run until stopped: the handler only sets a
// flag (nothing else is safe in a signal handler); a helper thread polls it and cancels the
// call in progress from ordinary code.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <set>
#include <thread>

namespace feedctl {

inline std::atomic<bool>& InterruptFlag() {
  static std::atomic<bool> flag{false};
  return flag;
}

// While alive: a signal cancels the registered calls (and any registered later).
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
        for (grpc::ClientContext* context : contexts_) context->TryCancel();
      }
    });
  }
  ~CancelOnInterrupt() {
    done_ = true;
    thread_.join();
  }
  // A call to cancel on a signal, until Unwatch (from any thread).
  void Watch(grpc::ClientContext* context) {
    std::lock_guard lock(mu_);
    contexts_.insert(context);
    if (Stopping()) context->TryCancel();
  }
  void Unwatch(grpc::ClientContext* context) {
    std::lock_guard lock(mu_);
    contexts_.erase(context);
  }
  static bool Interrupted() { return InterruptFlag(); }
  // Ends every watched call now and any watched later, as a signal would (one of several
  // streams failed for good).
  void Stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    for (grpc::ClientContext* context : contexts_) context->TryCancel();
  }
  bool Stopping() const { return stopped_ || InterruptFlag(); }

 private:
  std::mutex mu_;
  std::set<grpc::ClientContext*> contexts_;
  std::atomic<bool> done_{false};
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace feedctl

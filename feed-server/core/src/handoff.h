// A bounded hand-off between two pipeline stages: the producer pushes, the consumer takes
// everything waiting at once and says when it is done with it. It is idle when nothing waits
// and nothing taken is unfinished; its bound counts what waits, and optionally what was
// taken too (a stage whose work in progress should hold its producer back).
//
// Thread-safe. Push blocks while the hand-off is full; PopAll blocks until something waits
// or the hand-off is closed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace feed::core {

template <class T>
class Handoff {
 public:
  enum class Bound { kWaiting, kWaitingAndTaken };
  // Push blocks while `capacity` is reached, counting per `bound`. `weight` counts an item
  // (default 1), e.g. the events of a batch.
  Handoff(size_t capacity, Bound bound, std::function<size_t(const T&)> weight = nullptr)
      : capacity_(capacity), bound_(bound), weight_(std::move(weight)) {}

  // Blocks while full (what is counted has reached the capacity); then the item goes in
  // whatever its weight, so a heavy item never waits for more room than there is. Pushing
  // into a closed hand-off still hands the item over: the consumer drains everything before
  // PopAll returns false.
  void Push(T item) {
    const size_t w = Weight(item);
    {
      std::unique_lock lock(mu_);
      WaitForRoom(lock);
      items_.push_back(std::move(item));
      Added(w);
    }
    not_empty_.notify_one();
  }

  // Blocks until a Push would not block (for the only producer: it then starts the work that
  // its next item stands for only once there is room for it).
  void AwaitRoom() {
    std::unique_lock lock(mu_);
    WaitForRoom(lock);
  }
  // Push for several items at once: one wait for room, then all of them go in together (a
  // stage handing on a whole round is held back once, not once per item).
  void PushAll(std::vector<T> items) {
    size_t w = 0;
    for (const auto& item : items) w += Weight(item);
    {
      std::unique_lock lock(mu_);
      WaitForRoom(lock);
      for (auto& item : items) items_.push_back(std::move(item));
      Added(w);
    }
    not_empty_.notify_one();
  }

  // Moves everything waiting into `out` (cleared first); false once closed and drained.
  bool PopAll(std::vector<T>* out) {
    out->clear();
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return false;
    out->swap(items_);
    taken_ += waiting_;
    waiting_ = 0;
    lock.unlock();
    if (bound_ == Bound::kWaiting) not_full_.notify_all();
    return true;
  }

  // The consumer has finished the items PopAll gave it (their total weight): room for more,
  // and maybe idle. Runs the idle callback when nothing is busy any more.
  void Done(const std::vector<T>& finished) {
    size_t w = 0;
    for (const auto& item : finished) w += Weight(item);
    bool now_idle;
    {
      std::lock_guard lock(mu_);
      taken_ -= w;
      now_idle = waiting_ == 0 && taken_ == 0;
      if (now_idle) idle_.store(true, std::memory_order_relaxed);
    }
    not_full_.notify_all();
    if (now_idle && on_idle_) on_idle_();
  }

  // After it, PopAll returns false once everything waiting has been taken.
  void Close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    not_empty_.notify_all();
  }

  // Nothing waits and nothing is being worked on. Lock-free (read inside other locks'
  // predicates); exact once the on-idle callback has run.
  bool idle() const { return idle_.load(std::memory_order_relaxed); }
  // The weight of what waits (not what was taken).
  size_t waiting() const {
    std::lock_guard lock(mu_);
    return waiting_;
  }
  // Called (on the consumer's thread, without the hand-off's lock) each time it turns idle.
  void set_on_idle(std::function<void()> on_idle) { on_idle_ = std::move(on_idle); }

 private:
  size_t Weight(const T& item) const { return weight_ ? weight_(item) : 1; }
  void WaitForRoom(std::unique_lock<std::mutex>& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    not_full_.wait(lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const size_t counted = bound_ == Bound::kWaiting ? waiting_ : waiting_ + taken_;
      return counted < capacity_;
    });
  }
  void Added(size_t weight) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    waiting_ += weight;
    idle_.store(false, std::memory_order_relaxed);
  }

  const size_t capacity_;
  const Bound bound_;
  const std::function<size_t(const T&)> weight_;
  std::function<void()> on_idle_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::vector<T> items_ ABSL_GUARDED_BY(mu_);
  size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
  size_t taken_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> idle_{true};
};

}  // namespace feed::core

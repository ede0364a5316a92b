// The in-process change feed: every committed event, in sequence order, for the streams
// (WatchStock, Feed, StreamOrderUpdates) and for waking the Kafka relay.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "events/v1/events.pb.h"

namespace feed::core {

using EventPtr = std::shared_ptr<const events::v1::Event>;

class ChangeListener {
 public:
  virtual ~ChangeListener() = default;
  // Called after each commit (on the core's publisher thread, one call at a time), events in
  // sequence order. Must not block and must not call back into the ChangeFeed.
  virtual void OnEvents(const std::vector<EventPtr>& events) = 0;
  // The feed ended (ChangeFeed::Close): no event follows. Same rules as OnEvents.
  virtual void OnClosed(const absl::Status& /*why*/) {}
};

class ChangeFeed {
 public:
  explicit ChangeFeed(size_t retention) : retention_(retention) {}

  struct Attach {
    // Retained events with sequence > after_sequence, to deliver before the live ones.
    std::vector<EventPtr> replay;
    // True when events after after_sequence are no longer retained.
    bool gap = false;
    // The newest sequence published when attaching.
    uint64_t last_sequence = 0;
    uint64_t oldest_retained = 0;
  };

  // Registers `listener` and returns, atomically with it, the retained events after
  // `after_sequence`: replay then live delivery has no gap and no duplicate.
  // after_sequence = UINT64_MAX attaches for live events only. On a closed feed the listener
  // is not registered: its OnClosed is called before Subscribe returns.
  // With `keys` (Event.key values: SKUs for stock events, order ids for order events) the
  // listener gets only the live events of those keys, still in sequence order, and costs
  // nothing on a publish that does not touch them; without, it gets every event. The
  // replay is never filtered.
  Attach Subscribe(ChangeListener* listener, uint64_t after_sequence,
                   std::vector<std::string> keys = {});
  // After it returns, `listener` is never called again.
  void Unsubscribe(ChangeListener* listener);
  // Ends the feed for good (a cluster node no longer serves the core's shard): every
  // listener's OnClosed(why), once, then none is called again; later subscribers are told
  // at once. `why` is not OK.
  void Close(absl::Status why);
  // One caller at a time (the core's publisher thread), events in sequence order.
  void Publish(const std::vector<EventPtr>& events);
  // Sets the sequence already committed at startup, and the events before it that are still
  // known (`retained`: consecutive, ending at last_sequence; the newest `retention` are kept),
  // so that a stream that was open before a restart can resume without a new snapshot.
  void Reset(uint64_t last_sequence, std::vector<EventPtr> retained = {});

  // The newest sequence delivered to every listener. Lock-free: it does not wait for a
  // publication in progress (which can take long with thousands of listeners).
  uint64_t last_sequence() const { return last_sequence_.load(std::memory_order_acquire); }
  size_t listeners() const;
  // The newest `count` retained events, oldest first (fewer when fewer are retained).
  std::vector<EventPtr> Retained(size_t count) const;

 private:
  void DeliverKeyed(const std::vector<EventPtr>& events);  // with mu_ held

  const size_t retention_;
  mutable std::mutex mu_;
  std::vector<ChangeListener*> listeners_;  // every event
  // Keyed listeners: by key, and each one's keys (for Unsubscribe).
  absl::flat_hash_map<std::string, std::vector<ChangeListener*>> keyed_;
  absl::flat_hash_map<ChangeListener*, std::vector<std::string>> keys_of_;
  std::deque<EventPtr> retained_;
  absl::Status closed_;  // not OK once closed
  // Written under mu_ once every listener has the events, so that it can also be read
  // without mu_ (last_sequence()).
  std::atomic<uint64_t> last_sequence_{0};
};

}  // namespace feed::core

// One Feed stream's rules, without a network: its stock subscriptions (with snapshots that
// are consistent cuts), the order of the stock updates it receives, the per-stream key
// limit, and the holds leased to it.
//
// What the reader receives on a Feed stream:
//   - subscribe with snapshot: a KIND_SNAPSHOT row per matching level as of one cut (the
//     row's sequence is the cut), placed among the stream's other updates at the cut's
//     position, then every change of those levels after the cut;
//   - the stock updates of a stream are in sequence order and a level's version never goes
//     back; the same conflation rule and slow-reader ending as WatchStock (QueueLimits);
//   - a hold reserved with lease_to_stream is released when the stream ends, whether its
//     Reserve completed before or after the end (unless it was committed or released first).
//
// The session attaches to the change feed for every event (Attached), so it knows how far
// the feed has got: a snapshot whose cut the stream has not reached yet waits until every
// event up to the cut has been offered, or its rows would overtake older changes.
//
// Not thread-safe: the owning stream serializes access. ReadSnapshot alone may run without
// that serialization (it only reads the store).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/change_feed.h"
#include "core/inventory_core.h"
#include "core/stock_filter.h"
#include "core/stock_update_queue.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::core {

class FeedSession {
 public:
  FeedSession(InventoryCore& core, QueueLimits limits);
  // The stream's authenticated subject: the actor of the releases of its leases.
  void set_actor(std::string actor) { actor_ = std::move(actor); }

  // After attaching to the change feed (every event, live only).
  void Attached(const ChangeFeed::Attach& attach) {
    seen_through_ = std::max(seen_through_, attach.last_sequence);
  }

  // Subscribe runs in three steps so that the store is read without the stream's lock:
  // Begin (validates, checks the key limit, subscribes the keys), ReadSnapshot, Complete.
  struct Subscription {
    uint64_t id = 0;
    std::vector<inventory::v1::StockKey> keys;
    bool snapshot = false;
  };
  struct SnapshotRows {
    uint64_t cut = 0;
    std::vector<inventory::v1::StockLevel> levels;
  };
  absl::StatusOr<Subscription> BeginSubscribe(const inventory::v1::FeedSubscribe& request);
  absl::StatusOr<SnapshotRows> ReadSnapshot(const Subscription& subscription) const;
  // A failed read unsubscribes the keys again and returns its error. Check overflowed()
  // afterwards: the rows may have been more than the queue holds.
  absl::Status CompleteSubscribe(const Subscription& subscription,
                                 absl::StatusOr<SnapshotRows> rows);
  // Empty keys = every subscription.
  void Unsubscribe(const inventory::v1::FeedUnsubscribe& request);
  // Keys subscribed (including those whose snapshot is under way).
  size_t subscriptions() const;

  // Every published event, in sequence order. RESOURCE_EXHAUSTED when the reader is too far
  // behind.
  absl::Status Offer(const std::vector<EventPtr>& events);
  std::optional<inventory::v1::StockUpdate> NextUpdate() { return queue_.Pop(); }
  // The stream's write in flight has not completed for too long (StockUpdateQueue).
  void set_reader_behind(bool behind) { queue_.set_reader_behind(behind); }
  size_t queued() const { return queue_.size(); }
  // True once more updates waited than QueueLimits::max_queued: the stream must end
  // (SlowReaderError).
  bool overflowed() const { return overflowed_; }
  uint64_t conflated() const { return queue_.conflated(); }

  // Leases. A Reserve with lease_to_stream completed with this hold.
  void Leased(const std::string& reservation_id);
  // The hold was committed or released through this stream.
  void Closed(const std::string& reservation_id) { leases_.erase(reservation_id); }
  // The stream ended: releases every leased hold still open, and from now on each one that
  // Leased reports. Frees the queued updates.
  void End();
  size_t leases() const { return leases_.size(); }

 private:
  // A subscription with a snapshot whose rows have not joined the queue yet.
  struct Pending {
    uint64_t id = 0;
    StockFilter keys;  // the keys it added
    std::optional<SnapshotRows> rows;
  };

  bool Wanted(const inventory::v1::StockLevel& level) const;
  void ReleaseReadyPending();
  bool Release(Pending& pending);
  void ReleaseNow(const std::string& reservation_id);

  InventoryCore& core_;
  std::string actor_;
  const QueueLimits limits_;
  StockFilter filter_;
  std::deque<Pending> pending_;
  StockUpdateQueue queue_;
  uint64_t seen_through_ = 0;
  uint64_t next_subscription_ = 1;
  bool overflowed_ = false;
  absl::flat_hash_set<std::string> leases_;
  bool ended_ = false;
};

}  // namespace feed::core

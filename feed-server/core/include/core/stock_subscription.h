// One WatchStock stream's rules, without a network: which levels it wants, the snapshot,
// the resume from a sequence and its gap, and the order in which updates leave.
//
// What the reader receives:
//   - resume_after_sequence = 0: a snapshot of the matching levels as of one consistent cut
//     (KIND_SNAPSHOT rows, then KIND_SNAPSHOT_END, all carrying the cut's sequence), then
//     every change after the cut;
//   - resume_after_sequence = N: every retained change after N, one by one, then the live
//     ones; when changes after N are no longer retained, OUT_OF_RANGE (or, with
//     snapshot_on_gap, a fresh snapshot as above);
//   - every update after the snapshot has a higher sequence than the one before it, and a
//     level's version never goes back;
//   - a reader that keeps up gets every change; once it is behind (QueueLimits::
//     conflate_after updates wait, or set_reader_behind), changes of a level already queued
//     are merged into its newest (`conflated: true`, still in sequence order); past
//     QueueLimits::max_queued the stream ends with RESOURCE_EXHAUSTED.
//
// Use: Validate, attach to the change feed with attach_after() and delivery_keys(), then
// Start with the attach result; Offer the live events (also before Start); send what Next
// returns. Not thread-safe: the owning stream serializes access.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/change_feed.h"
#include "core/inventory_core.h"
#include "core/stock_filter.h"
#include "core/stock_update_queue.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::core {

class StockSubscription {
 public:
  StockSubscription(const InventoryCore& core, const inventory::v1::WatchStockRequest& request,
                    QueueLimits limits);

  // INVALID_ARGUMENT naming the bad key.
  absl::Status Validate() const;
  // The change feed attachment: the sequence to replay after (UINT64_MAX: live only) and the
  // delivery keys (SKUs; empty = every event).
  uint64_t attach_after() const;
  std::vector<std::string> delivery_keys() const { return filter_.Skus(); }

  // Once attached: OUT_OF_RANGE for a gap the request does not want a snapshot for, or the
  // snapshot's read error.
  absl::Status Start(const ChangeFeed::Attach& attach);
  // Live events, in sequence order. RESOURCE_EXHAUSTED when the reader is too far behind.
  absl::Status Offer(const std::vector<EventPtr>& events);
  // The next update to send; nullopt when none is ready (nothing new, or not started).
  // Errors come from reading the snapshot.
  absl::StatusOr<std::optional<inventory::v1::StockUpdate>> Next();

  // The stream's write in flight has not completed for too long (StockUpdateQueue).
  void set_reader_behind(bool behind) { queue_.set_reader_behind(behind); }
  // Updates waiting in the live queue, and how many were merged so far.
  size_t queued() const { return queue_.size(); }
  uint64_t conflated() const { return queue_.conflated(); }
  // Frees what an ended stream will never send.
  void Clear();

 private:
  bool Wants(const inventory::v1::StockLevel& level) const {
    return filter_.empty() || filter_.Matches(level);
  }
  absl::Status OpenSnapshot();
  absl::Status ReadSnapshotChunk();

  // The request with its sku shorthand turned into keys; `status` says if it could be.
  static inventory::v1::WatchStockRequest Expanded(inventory::v1::WatchStockRequest request,
                                                   absl::Status* status);

  const InventoryCore& core_;
  absl::Status shorthand_;  // before request_: initialized first
  const inventory::v1::WatchStockRequest request_;
  const QueueLimits limits_;
  StockFilter filter_;
  StockUpdateQueue queue_;
  bool started_ = false;
  // Live events at or below this are already covered (by the snapshot or the client).
  uint64_t covered_through_ = 0;

  std::unique_ptr<InventoryCore::StockSnapshot> snapshot_;
  std::vector<inventory::v1::StockLevel> snapshot_rows_;
  size_t next_row_ = 0;
  bool snapshot_end_pending_ = false;

  std::vector<EventPtr> replay_;
  size_t next_replay_ = 0;
};

}  // namespace feed::core

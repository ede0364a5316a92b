// The outbound queue of one stream: command results in order (never dropped), stock
// updates conflated per level (a slow reader gets the newest level of each SKU, never a
// backlog). Memory is bounded by the number of distinct levels waiting; past
// `max_levels` the stream is reported as overflowing and must be ended.
//
// Not thread-safe: the owning stream serializes access.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::server {

class ConflatingQueue {
 public:
  explicit ConflatingQueue(size_t max_levels) : max_levels_(max_levels) {}

  // Queues a change of one level. Replaces a queued, unsent update of the same level
  // (marking it conflated). Returns false if the queue now overflows.
  bool PushLevel(const inventory::v1::StockLevel& level, uint64_t sequence,
                 inventory::v1::StockUpdate::Kind kind = inventory::v1::StockUpdate::KIND_CHANGE);

  // The next update in arrival order of first change, or nullopt.
  std::optional<inventory::v1::StockUpdate> Pop();

  size_t size() const { return order_.size(); }
  bool empty() const { return order_.empty(); }
  uint64_t conflated() const { return conflated_; }

 private:
  // A queued level in plain fields: a slow reader may hold max_levels of these, so each is
  // ~130 bytes (its key once, in order_) instead of a StockUpdate's ~350 in five allocations.
  struct Pending {
    int64_t on_hand = 0;
    int64_t reserved = 0;
    int64_t available = 0;
    uint64_t version = 0;
    int64_t updated_at_ms = 0;
    uint64_t level_sequence = 0;
    uint64_t sequence = 0;
    inventory::v1::StockUpdate::Kind kind = inventory::v1::StockUpdate::KIND_UNSPECIFIED;
    bool allow_backorder = false;
    bool conflated = false;
  };

  size_t max_levels_;
  // Level keys in order of first change; pending_ keys view these strings (a deque does not
  // move its elements on push_back / pop_front).
  std::deque<std::string> order_;
  absl::flat_hash_map<std::string_view, Pending> pending_;
  uint64_t conflated_ = 0;
};

}  // namespace feed::server

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
  size_t max_levels_;
  std::deque<std::string> order_;
  absl::flat_hash_map<std::string, inventory::v1::StockUpdate> pending_;
  uint64_t conflated_ = 0;
};

}  // namespace feed::server

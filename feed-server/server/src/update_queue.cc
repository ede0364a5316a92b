#include "server/update_queue.h"

#include "core/level_key.h"

namespace feed::server {

bool ConflatingQueue::PushLevel(const inventory::v1::StockLevel& level, uint64_t sequence,
                                inventory::v1::StockUpdate::Kind kind) {
  std::string key = core::LevelKey(level.sku(), level.location());
  auto [it, inserted] = pending_.try_emplace(key);
  auto& update = it->second;
  if (inserted) {
    order_.push_back(std::move(key));
  } else {
    // Keep the snapshot marker if the conflated entry was a snapshot row: the reader still
    // learns the level once, at its newest value.
    update.set_conflated(true);
    ++conflated_;
  }
  if (inserted || update.kind() != inventory::v1::StockUpdate::KIND_SNAPSHOT) update.set_kind(kind);
  *update.mutable_level() = level;
  update.set_sequence(sequence);
  return order_.size() <= max_levels_;
}

std::optional<inventory::v1::StockUpdate> ConflatingQueue::Pop() {
  if (order_.empty()) return std::nullopt;
  auto it = pending_.find(order_.front());
  std::optional<inventory::v1::StockUpdate> out(std::move(it->second));
  pending_.erase(it);
  order_.pop_front();
  return out;
}

}  // namespace feed::server

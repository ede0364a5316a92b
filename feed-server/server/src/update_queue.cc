#include "server/update_queue.h"

#include "core/level_key.h"

namespace feed::server {

bool ConflatingQueue::PushLevel(const inventory::v1::StockLevel& level, uint64_t sequence,
                                inventory::v1::StockUpdate::Kind kind) {
  std::string key = core::LevelKey(level.sku(), level.location());
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    order_.push_back(std::move(key));
    it = pending_.try_emplace(order_.back()).first;
    it->second.kind = kind;
  } else {
    // Keep the snapshot marker if the conflated entry was a snapshot row: the reader still
    // learns the level once, at its newest value.
    it->second.conflated = true;
    ++conflated_;
    if (it->second.kind != inventory::v1::StockUpdate::KIND_SNAPSHOT) it->second.kind = kind;
  }
  Pending& p = it->second;
  p.on_hand = level.on_hand();
  p.reserved = level.reserved();
  p.available = level.available();
  p.version = level.version();
  p.allow_backorder = level.allow_backorder();
  p.updated_at_ms = level.updated_at_ms();
  p.level_sequence = level.sequence();
  p.sequence = sequence;
  return order_.size() <= max_levels_;
}

std::optional<inventory::v1::StockUpdate> ConflatingQueue::Pop() {
  if (order_.empty()) return std::nullopt;
  auto it = pending_.find(order_.front());
  const Pending& p = it->second;
  std::optional<inventory::v1::StockUpdate> out(std::in_place);
  out->set_kind(p.kind);
  out->set_sequence(p.sequence);
  out->set_conflated(p.conflated);
  auto* level = out->mutable_level();
  auto [sku, location] = core::SplitLevelKey(order_.front());
  level->set_sku(std::string(sku));
  level->set_location(std::string(location));
  level->set_on_hand(p.on_hand);
  level->set_reserved(p.reserved);
  level->set_available(p.available);
  level->set_version(p.version);
  level->set_allow_backorder(p.allow_backorder);
  level->set_updated_at_ms(p.updated_at_ms);
  level->set_sequence(p.level_sequence);
  pending_.erase(it);  // before its key's string goes
  order_.pop_front();
  return out;
}

}  // namespace feed::server

#include "core/stock_update_queue.h"

#include <algorithm>

#include "core/level_key.h"
#include "fmt/format.h"

namespace feed::core {

using inventory::v1::StockLevel;
using inventory::v1::StockUpdate;

absl::Status SlowReaderError(const QueueLimits& limits) {
  return absl::ResourceExhaustedError(
      fmt::format("reader too slow: more than {} updates waiting; reconnect, resuming from the "
                  "last sequence received (WatchStock resume_after_sequence)",
                  limits.max_queued));
}

StockUpdateQueue::StockUpdateQueue(QueueLimits limits) : limits_(limits) {}

StockUpdateQueue::Entry StockUpdateQueue::MakeEntry(const StockLevel& level, uint64_t sequence,
                                                    StockUpdate::Kind kind) {
  Entry e;
  e.key = LevelKey(level.sku(), level.location());
  e.on_hand = level.on_hand();
  e.reserved = level.reserved();
  e.available = level.available();
  e.version = level.version();
  e.updated_at_ms = level.updated_at_ms();
  e.level_sequence = level.sequence();
  e.allow_backorder = level.allow_backorder();
  e.sequence = sequence;
  e.kind = kind;
  return e;
}

void StockUpdateQueue::Erase(Entries::iterator it) {
  auto indexed = newest_.find(std::string_view(it->key));
  if (indexed != newest_.end() && indexed->second == it) newest_.erase(indexed);
  entries_.erase(it);
}

bool StockUpdateQueue::Push(const StockLevel& level, uint64_t sequence, StockUpdate::Kind kind) {
  Entry entry = MakeEntry(level, sequence, kind);
  auto indexed = newest_.find(std::string_view(entry.key));
  if (indexed != newest_.end()) {
    if (reader_behind_ || entries_.size() >= limits_.conflate_after) {
      // Behind: the newest level replaces the queued one, at the end of the queue. A level
      // the reader has not seen yet at all stays a snapshot row.
      if (indexed->second->kind == StockUpdate::KIND_SNAPSHOT)
        entry.kind = StockUpdate::KIND_SNAPSHOT;
      entry.conflated = true;
      ++conflated_;
      entries_.erase(indexed->second);
    }
    // Re-indexed below: the key must view the newest entry's own string, since an older
    // entry of the same level (kept while the reader keeps up) may leave first.
    newest_.erase(indexed);
  }
  entries_.push_back(std::move(entry));
  auto last = std::prev(entries_.end());
  newest_.emplace(std::string_view(last->key), last);
  return WithinLimit();
}

bool StockUpdateQueue::InsertSnapshotRow(const StockLevel& level, uint64_t cut) {
  auto pos = entries_.end();
  while (pos != entries_.begin() && std::prev(pos)->sequence > cut) --pos;
  auto row = entries_.insert(pos, MakeEntry(level, cut, StockUpdate::KIND_SNAPSHOT));
  auto [indexed, inserted] = newest_.try_emplace(std::string_view(row->key), row);
  if (!inserted && indexed->second->sequence <= cut) {
    // The row is now the level's newest update; the index keeps viewing a live key.
    newest_.erase(indexed);
    newest_.emplace(std::string_view(row->key), row);
  }
  return WithinLimit();
}

void StockUpdateQueue::DropThrough(
    uint64_t through, const std::function<bool(std::string_view, std::string_view)>& drop) {
  for (auto it = entries_.begin(); it != entries_.end() && it->sequence <= through;) {
    auto [sku, location] = SplitLevelKey(it->key);
    if (drop(sku, location)) {
      Erase(it++);
    } else {
      ++it;
    }
  }
}

std::optional<StockUpdate> StockUpdateQueue::Pop() {
  if (entries_.empty()) return std::nullopt;
  const Entry& e = entries_.front();
  std::optional<StockUpdate> out(std::in_place);
  out->set_kind(e.kind);
  out->set_sequence(e.sequence);
  out->set_conflated(e.conflated);
  StockLevel* level = out->mutable_level();
  auto [sku, location] = SplitLevelKey(e.key);
  level->set_sku(std::string(sku));
  level->set_location(std::string(location));
  level->set_on_hand(e.on_hand);
  level->set_reserved(e.reserved);
  level->set_available(e.available);
  level->set_version(e.version);
  level->set_allow_backorder(e.allow_backorder);
  level->set_updated_at_ms(e.updated_at_ms);
  level->set_sequence(e.level_sequence);
  Erase(entries_.begin());
  return out;
}

void StockUpdateQueue::Clear() {
  newest_.clear();
  entries_.clear();
}

}  // namespace feed::core

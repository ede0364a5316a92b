// WriterState::Recover: the writer's state rebuilt from the store at startup.
#include <chrono>
#include <random>
#include <thread>

#include "core/level_key.h"
#include "logging.h"
#include "writer_state.h"

namespace feed::core {

using inventory::v1::Reservation;
using inventory::v1::StockLevel;
using storage::Table;

absl::StatusOr<uint64_t> WriterState::Recover() {
  auto next = store_.Get(Table::kMeta, storage::meta_keys::kNextSequence);
  if (!next.ok()) return next.status();
  if (next->has_value()) {
    auto seq = storage::DecodeSequence(**next);
    if (!seq) return absl::DataLossError("meta next_sequence is corrupt");
    next_sequence_ = *seq;
  }
  auto id = store_.Get(Table::kMeta, storage::meta_keys::kStoreId);
  if (!id.ok()) return id.status();
  if (id->has_value()) {
    store_id_ = **id;
  } else {
    // A new store: a random id keeps event ids unique across stores that restart at 1.
    std::random_device rd;
    const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    store_id_ = fmt::format("{:016x}", v);
    auto group = store_.NewWriteGroup();
    group->Put(Table::kMeta, storage::meta_keys::kStoreId, store_id_);
    if (auto s = store_.Commit(*group); !s.ok()) return s;
  }

  // The two tables are independent: read them on two threads (startup with a million levels
  // and a million holds is mostly protobuf parsing and hash-map inserts). Every index is
  // sized from the store's estimate first, so none is rehashed while it grows.
  const auto started = std::chrono::steady_clock::now();
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
  };
  int64_t stock_ms = 0, holds_ms = 0;
  absl::Status stock_error, holds_error;
  std::thread stock_reader([&] {
    levels_.reserve(store_.ApproximateCount(Table::kStock));
    absl::Status parse_error;
    stock_error =
        store_.Scan(Table::kStock, "", "", [&](std::string_view key, std::string_view value) {
          StockLevel p;
          if (!p.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
            parse_error = absl::DataLossError("stock level record is corrupt");
            return false;
          }
          levels_.emplace(std::string(key),
                          Level{p.on_hand(), p.reserved(), p.version(), p.allow_backorder(),
                                p.updated_at_ms(), p.sequence()});
          return true;
        });
    if (stock_error.ok()) stock_error = parse_error;
    stock_ms = ms_since(started);
  });
  // What the open holds reserve per level, keyed by views of the level keys inside holds_
  // (its nodes do not move), so summing a million lines allocates nothing per line.
  absl::flat_hash_map<std::string_view, int64_t> held;
  {
    const size_t estimate = store_.ApproximateCount(Table::kHolds);
    holds_.reserve(estimate);
    held.reserve(estimate);
    std::vector<std::pair<int64_t, std::string_view>> expiring;
    expiring.reserve(estimate);
    absl::Status parse_error;
    Reservation record;  // reused: parsing into it again allocates nothing new
    holds_error =
        store_.Scan(Table::kHolds, "", "", [&](std::string_view key, std::string_view value) {
          if (!record.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
            parse_error = absl::DataLossError(fmt::format("hold record '{}' is corrupt", key));
            return false;
          }
          auto& [hold_id, hold] = *holds_.try_emplace(std::string(key)).first;
          if (record.reservation_id() != key || !ToHold(record, &hold)) {
            parse_error = absl::DataLossError(
                fmt::format("hold record '{}' is not a HELD reservation with that id", key));
            return false;
          }
          for (const auto& line : hold.lines) held[line.level_key] += line.quantity;
          expiring.emplace_back(hold.expires_at_ms, hold_id);
          return true;
        });
    if (holds_error.ok()) holds_error = parse_error;
    // Sorted first, the expiry index is built by appending.
    std::sort(expiring.begin(), expiring.end());
    for (const auto& entry : expiring) expiry_index_.insert(expiry_index_.end(), entry);
    holds_ms = ms_since(started);
  }
  stock_reader.join();
  if (!stock_error.ok()) return stock_error;
  if (!holds_error.ok()) return holds_error;

  // The invariants of DESIGN section 3, checked on every start.
  size_t levels_with_holds = 0;
  for (const auto& [key, level] : levels_) {
    auto [sku, location] = SplitLevelKey(key);
    auto it = held.find(key);
    int64_t sum = 0;
    if (it != held.end()) {
      sum = it->second;
      ++levels_with_holds;
    }
    if (sum != level.reserved) {
      return absl::DataLossError(fmt::format(
          "invariant broken: sku '{}' at '{}' has reserved {} but its open holds sum to {}", sku,
          location, level.reserved, sum));
    }
    if (!level.allow_backorder && level.on_hand - level.reserved < 0) {
      return absl::DataLossError(
          fmt::format("invariant broken: sku '{}' at '{}' has negative available", sku, location));
    }
  }
  if (levels_with_holds != held.size()) {
    for (const auto& [level_key, sum] : held) {
      if (!levels_.contains(absl::string_view(level_key.data(), level_key.size()))) {
        auto [sku, location] = SplitLevelKey(level_key);
        return absl::DataLossError(fmt::format(
            "invariant broken: open holds reserve {} of sku '{}' at '{}', a level that does not "
            "exist",
            sum, sku, location));
      }
    }
  }
  stat_holds_ = holds_.size();
  stat_levels_ = levels_.size();
  CoreLogger()->info(
      "recovered {} stock levels, {} open holds, next sequence {}, store id {} in {} ms (stock "
      "read in {} ms, holds in {} ms, alongside)",
      levels_.size(), holds_.size(), next_sequence_, store_id_, ms_since(started), stock_ms,
      holds_ms);
  return next_sequence_ - 1;
}

}  // namespace feed::core

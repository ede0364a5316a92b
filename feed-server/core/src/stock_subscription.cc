#include "core/stock_subscription.h"

#include <cstdint>

#include "core/validation.h"
#include "fmt/format.h"

namespace feed::core {
namespace {

using inventory::v1::StockLevel;
using inventory::v1::StockUpdate;

constexpr size_t kSnapshotChunk = 256;

StockUpdate Update(StockUpdate::Kind kind, uint64_t sequence, const StockLevel* level) {
  StockUpdate u;
  u.set_kind(kind);
  u.set_sequence(sequence);
  if (level) *u.mutable_level() = *level;
  return u;
}

}  // namespace

StockSubscription::StockSubscription(const InventoryCore& core,
                                     const inventory::v1::WatchStockRequest& request,
                                     QueueLimits limits)
    : core_(core), request_(Expanded(request, &shorthand_)), limits_(limits), queue_(limits) {
  for (const auto& k : request_.keys()) filter_.Add(k);
}

inventory::v1::WatchStockRequest StockSubscription::Expanded(
    inventory::v1::WatchStockRequest request, absl::Status* status) {
  *status = ExpandSkuShorthand(&request);
  return request;
}

absl::Status StockSubscription::Validate() const {
  if (!shorthand_.ok()) return shorthand_;
  return ValidateStockKeys("keys", request_.keys(), core_.options());
}

uint64_t StockSubscription::attach_after() const {
  return request_.resume_after_sequence() == 0 ? UINT64_MAX : request_.resume_after_sequence();
}

absl::Status StockSubscription::Start(const ChangeFeed::Attach& attach) {
  started_ = true;
  if (request_.resume_after_sequence() == 0) return OpenSnapshot();
  if (attach.gap) {
    if (!request_.snapshot_on_gap()) {
      return absl::OutOfRangeError(fmt::format(
          "resume_after_sequence {} is no longer retained (oldest retained: {}); resubscribe "
          "with resume_after_sequence=0 or snapshot_on_gap=true",
          request_.resume_after_sequence(), attach.oldest_retained));
    }
    return OpenSnapshot();
  }
  replay_ = attach.replay;
  // The client has everything through its sequence, which may be newer than what the
  // feed had published when it attached (a reply can arrive before its publication).
  covered_through_ = request_.resume_after_sequence();
  queue_.DropThrough(covered_through_, [](std::string_view, std::string_view) { return true; });
  return absl::OkStatus();
}

absl::Status StockSubscription::OpenSnapshot() {
  std::vector<inventory::v1::StockKey> keys(request_.keys().begin(), request_.keys().end());
  auto snapshot = core_.OpenStockSnapshot(std::move(keys));
  if (!snapshot.ok()) return snapshot.status();
  snapshot_ = std::move(*snapshot);
  covered_through_ = snapshot_->as_of_sequence();
  // Live events queued while the snapshot was being opened that it already contains.
  queue_.DropThrough(covered_through_, [](std::string_view, std::string_view) { return true; });
  snapshot_end_pending_ = true;
  return ReadSnapshotChunk();
}

absl::Status StockSubscription::ReadSnapshotChunk() {
  snapshot_rows_.clear();
  next_row_ = 0;
  auto more = snapshot_->Next(kSnapshotChunk, &snapshot_rows_);
  if (!more.ok()) return more.status();
  if (!*more) snapshot_.reset();  // the rows read now are the last; the end marker follows
  return absl::OkStatus();
}

absl::Status StockSubscription::Offer(const std::vector<EventPtr>& events) {
  bool overflow = false;
  for (const auto& e : events) {
    if (!e->has_stock_changed() || (started_ && e->sequence() <= covered_through_)) continue;
    const StockLevel& level = e->stock_changed().level();
    if (!Wants(level)) continue;
    overflow |= !queue_.Push(level, e->sequence());
  }
  if (!overflow) return absl::OkStatus();
  return SlowReaderError(limits_);
}

absl::StatusOr<std::optional<StockUpdate>> StockSubscription::Next() {
  if (!started_) return std::nullopt;
  if (snapshot_end_pending_) {
    if (next_row_ == snapshot_rows_.size() && snapshot_) {
      if (auto s = ReadSnapshotChunk(); !s.ok()) return s;
    }
    if (next_row_ < snapshot_rows_.size()) {
      return Update(StockUpdate::KIND_SNAPSHOT, covered_through_, &snapshot_rows_[next_row_++]);
    }
    if (!snapshot_) {
      snapshot_end_pending_ = false;
      snapshot_rows_ = {};
      return Update(StockUpdate::KIND_SNAPSHOT_END, covered_through_, nullptr);
    }
  }
  while (next_replay_ < replay_.size()) {
    const EventPtr& e = replay_[next_replay_++];
    if (!e->has_stock_changed() || e->sequence() <= covered_through_) continue;
    if (!Wants(e->stock_changed().level())) continue;
    return Update(StockUpdate::KIND_CHANGE, e->sequence(), &e->stock_changed().level());
  }
  if (!replay_.empty()) replay_ = {};
  return queue_.Pop();
}

void StockSubscription::Clear() {
  queue_.Clear();
  snapshot_.reset();
  snapshot_rows_ = {};
  replay_ = {};
  snapshot_end_pending_ = false;
}

}  // namespace feed::core

#include "core/feed_session.h"

#include <algorithm>

#include "core/validation.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace feed::core {

using inventory::v1::StockKey;
using inventory::v1::StockLevel;

FeedSession::FeedSession(InventoryCore& core, QueueLimits limits)
    : core_(core), limits_(limits), queue_(limits) {}

absl::StatusOr<FeedSession::Subscription> FeedSession::BeginSubscribe(
    const inventory::v1::FeedSubscribe& request) {
  if (request.keys().empty()) {
    return absl::InvalidArgumentError("subscribe.keys: at least one key is required");
  }
  if (auto s = ValidateStockKeys("subscribe.keys", request.keys(), core_.options()); !s.ok()) {
    return s;
  }
  Subscription sub;
  sub.id = next_subscription_++;
  sub.snapshot = request.snapshot();
  StockFilter added;
  for (const auto& k : request.keys()) {
    if (filter_.Contains(k) || !added.Add(k)) continue;
    bool pending = std::any_of(pending_.begin(), pending_.end(),
                               [&](const Pending& p) { return p.keys.Contains(k); });
    if (!pending) sub.keys.push_back(k);
  }
  const size_t limit = core_.options().limits.max_keys_per_read;
  if (subscriptions() + sub.keys.size() > limit) {
    return absl::InvalidArgumentError(
        fmt::format("subscribe.keys: a stream may subscribe to at most {} keys", limit));
  }
  if (!sub.snapshot) {
    for (const auto& k : sub.keys) filter_.Add(k);
    return sub;
  }
  // The snapshot's rows join the queue once read; meanwhile changes of the new keys queue
  // as usual (those the snapshot will contain are dropped then).
  Pending p;
  p.id = sub.id;
  for (const auto& k : sub.keys) p.keys.Add(k);
  pending_.push_back(std::move(p));
  // The rows cover every requested key, also those already subscribed.
  sub.keys.assign(request.keys().begin(), request.keys().end());
  return sub;
}

absl::StatusOr<FeedSession::SnapshotRows> FeedSession::ReadSnapshot(
    const Subscription& subscription) const {
  auto snapshot = core_.OpenStockSnapshot(subscription.keys);
  if (!snapshot.ok()) return snapshot.status();
  SnapshotRows rows;
  rows.cut = (*snapshot)->as_of_sequence();
  while (true) {
    auto more = (*snapshot)->Next(256, &rows.levels);
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  return rows;
}

absl::Status FeedSession::CompleteSubscribe(const Subscription& subscription,
                                            absl::StatusOr<SnapshotRows> rows) {
  if (!subscription.snapshot) return absl::OkStatus();
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](const Pending& p) { return p.id == subscription.id; });
  if (it == pending_.end()) return absl::OkStatus();  // unsubscribed meanwhile
  if (!rows.ok()) {
    pending_.erase(it);
    return rows.status();
  }
  it->rows = std::move(*rows);
  ReleaseReadyPending();
  return absl::OkStatus();
}

void FeedSession::Unsubscribe(const inventory::v1::FeedUnsubscribe& request) {
  if (request.keys().empty()) {
    filter_.Clear();
    pending_.clear();
    return;
  }
  for (const auto& k : request.keys()) {
    filter_.Remove(k);
    for (auto& p : pending_) p.keys.Remove(k);
  }
}

size_t FeedSession::subscriptions() const {
  size_t n = filter_.size();
  for (const auto& p : pending_) n += p.keys.size();
  return n;
}

bool FeedSession::Wanted(const StockLevel& level) const {
  if (filter_.Matches(level)) return true;
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const Pending& p) { return p.keys.Matches(level); });
}

absl::Status FeedSession::Offer(const std::vector<EventPtr>& events) {
  if (events.empty()) return absl::OkStatus();
  seen_through_ = std::max(seen_through_, events.back()->sequence());
  if (!filter_.empty() || !pending_.empty()) {
    for (const auto& e : events) {
      if (!e->has_stock_changed() || !Wanted(e->stock_changed().level())) continue;
      overflowed_ |= !queue_.Push(e->stock_changed().level(), e->sequence());
    }
  }
  ReleaseReadyPending();
  if (overflowed_) return SlowReaderError(limits_);
  return absl::OkStatus();
}

void FeedSession::ReleaseReadyPending() {
  // Cuts grow with each subscription (the store only moves forward), so they join in order.
  while (!pending_.empty() && pending_.front().rows &&
         pending_.front().rows->cut <= seen_through_) {
    overflowed_ |= !Release(pending_.front());
    pending_.pop_front();
  }
}

bool FeedSession::Release(Pending& pending) {
  const uint64_t cut = pending.rows->cut;
  // Changes of the new keys up to the cut are in the rows; changes of levels some other
  // subscription already delivers stay where they are.
  queue_.DropThrough(cut, [&](std::string_view sku, std::string_view location) {
    return pending.keys.Matches(sku, location) && !filter_.Matches(sku, location);
  });
  bool within = true;
  for (const auto& level : pending.rows->levels) {
    if (pending.keys.Matches(level) || filter_.Matches(level)) {
      within &= queue_.InsertSnapshotRow(level, cut);
    }
  }
  filter_.Merge(pending.keys);  // the keys become ordinary subscriptions
  return within;
}

void FeedSession::Leased(const std::string& reservation_id) {
  if (ended_) {
    ReleaseNow(reservation_id);
  } else {
    leases_.insert(reservation_id);
  }
}

void FeedSession::End() {
  if (ended_) return;
  ended_ = true;
  for (const auto& id : leases_) ReleaseNow(id);
  leases_.clear();
  queue_.Clear();
  pending_.clear();
}

void FeedSession::ReleaseNow(const std::string& reservation_id) {
  inventory::v1::ReleaseRequest release;
  release.set_reservation_id(reservation_id);
  release.set_reason("lease ended: the Feed stream closed");
  core_.Release(
      std::move(release),
      [reservation_id](absl::StatusOr<inventory::v1::ReleaseResponse> r) {
        // Already committed or released elsewhere: nothing to do.
        if (!r.ok() && r.status().code() != absl::StatusCode::kFailedPrecondition) {
          spdlog::warn(
              "feed session: releasing leased hold '{}' failed: {} (its TTL still applies)",
              reservation_id, r.status().ToString());
        }
      },
      ActingAs(actor_));
}

}  // namespace feed::core

#include "server_status.h"

namespace feed::server {
namespace {

// How many of the newest retained events are looked through, and how many of each kind kept.
constexpr size_t kEventsScanned = 4096;
constexpr size_t kRecentKept = 15;

bool ReservationActivity(const events::v1::Event& e) {
  if (!e.has_stock_changed()) return false;
  switch (e.stock_changed().cause()) {
    case events::v1::STOCK_CHANGE_CAUSE_RESERVE:
    case events::v1::STOCK_CHANGE_CAUSE_COMMIT:
    case events::v1::STOCK_CHANGE_CAUSE_RELEASE:
    case events::v1::STOCK_CHANGE_CAUSE_EXPIRE:
      return true;
    default:
      return false;
  }
}

}  // namespace

ServerStatus CollectStatus(core::InventoryCore& core, const bridge::Relay* relay) {
  ServerStatus s;
  s.core = core.stats();
  s.serving = core.health().ok();
  if (relay != nullptr) {
    const bridge::RelayStats r = relay->stats();
    s.kafka_configured = true;
    s.kafka_reachable = r.kafka_reachable;
    s.outbox_depth = r.outbox_depth;
    s.oldest_undelivered_age_ms = r.oldest_undelivered_age_ms;
    s.kafka_lag_p50_ms = r.lag_p50_ms;
    s.kafka_lag_p99_ms = r.lag_p99_ms;
    s.kafka_delivered = r.delivered;
  }
  const std::vector<core::EventPtr> events = core.change_feed().Retained(kEventsScanned);
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const events::v1::Event& e = **it;
    if (ReservationActivity(e) && s.recent_reservations.size() < kRecentKept) {
      s.recent_reservations.push_back(*it);
    } else if (e.has_order_status_changed() && s.recent_orders.size() < kRecentKept) {
      s.recent_orders.push_back(*it);
    }
    if (s.recent_reservations.size() == kRecentKept && s.recent_orders.size() == kRecentKept) break;
  }
  return s;
}

}  // namespace feed::server

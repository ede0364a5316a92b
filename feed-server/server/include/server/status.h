// What the process is doing right now, for the dashboard (/dashboard/status.json): the
// core's counters, the Kafka relay's state and the latest reservation and order events.
// Transport-free; the application fills it in (it owns the core and the relay).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/change_feed.h"
#include "core/inventory_core.h"

namespace feed::server {

struct ServerStatus {
  core::CoreStats core;
  bool serving = true;  // false while shutting down or after a failed commit
  bool kafka_configured = false;
  bool kafka_reachable = false;
  uint64_t outbox_depth = 0;  // events committed and not yet acknowledged by Kafka
  int64_t oldest_undelivered_age_ms = 0;
  double kafka_lag_p50_ms = 0;  // commit to Kafka acknowledgement, recent records
  double kafka_lag_p99_ms = 0;
  uint64_t kafka_delivered = 0;
  // Newest first: stock changes made by reservations (reserve, commit, release, expiry) and
  // order status changes, from the events the change feed still retains.
  std::vector<core::EventPtr> recent_reservations;
  std::vector<core::EventPtr> recent_orders;
};

using StatusFn = std::function<ServerStatus()>;

}  // namespace feed::server

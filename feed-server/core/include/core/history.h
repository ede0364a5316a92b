// How long the store keeps what is over: closed reservations and finished orders. Past the
// retention they read as absent (GetReservation, GetOrder, and the writer's lookups) and
// compaction drops them, so the store does not grow with every sale for good.
#pragma once

#include <cstdint>
#include <string_view>

#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "storage/store.h"

namespace feed::core {

// A committed, released or expired reservation closed more than retention_ms before now_ms.
// Held ones never expire here (their hold time to live does that). retention_ms <= 0 keeps
// every record.
bool ReservationExpired(const inventory::v1::Reservation& reservation, int64_t now_ms,
                        int64_t retention_ms);

// A delivered, cancelled or expired order last changed more than retention_ms before now_ms.
// Orders still under way never expire.
bool OrderExpired(const order::v1::Order& order, int64_t now_ms, int64_t retention_ms);

// The same for a stored record of Table::kReservations or Table::kOrders (the store's
// compaction filter, storage::RocksDbOptions::history_expired). Other tables and records
// that do not parse are kept.
bool HistoryExpired(storage::Table table, std::string_view value, int64_t now_ms,
                    int64_t retention_ms);

}  // namespace feed::core

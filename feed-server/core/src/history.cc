#include "core/history.h"

namespace feed::core {

bool ReservationExpired(const inventory::v1::Reservation& reservation, int64_t now_ms,
                        int64_t retention_ms) {
  if (retention_ms <= 0) return false;
  if (reservation.state() == inventory::v1::RESERVATION_STATE_HELD) return false;
  return now_ms - reservation.closed_at_ms() > retention_ms;
}

bool OrderExpired(const order::v1::Order& order, int64_t now_ms, int64_t retention_ms) {
  if (retention_ms <= 0) return false;
  switch (order.status()) {
    case order::v1::ORDER_STATUS_DELIVERED:
    case order::v1::ORDER_STATUS_CANCELLED:
    case order::v1::ORDER_STATUS_EXPIRED:
      return now_ms - order.updated_at_ms() > retention_ms;
    default:
      return false;
  }
}

bool HistoryExpired(storage::Table table, std::string_view value, int64_t now_ms,
                    int64_t retention_ms) {
  if (retention_ms <= 0) return false;
  const int size = static_cast<int>(value.size());
  if (table == storage::Table::kReservations) {
    inventory::v1::Reservation reservation;
    return reservation.ParseFromArray(value.data(), size) &&
           ReservationExpired(reservation, now_ms, retention_ms);
  }
  if (table == storage::Table::kOrders) {
    order::v1::Order order;
    return order.ParseFromArray(value.data(), size) && OrderExpired(order, now_ms, retention_ms);
  }
  return false;
}

}  // namespace feed::core

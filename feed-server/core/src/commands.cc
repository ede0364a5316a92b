// The command handlers of WriterState: each checks everything first, then changes state.
#include "common/event_types.h"
#include "core/level_key.h"
#include "core/validation.h"
#include "logging.h"
#include "writer_state.h"

namespace feed::core {

using inventory::v1::Reservation;
using order::v1::Order;
using order::v1::OrderStatus;

absl::Status WriterState::DoAdjust(inventory::v1::AdjustStockRequest& r, Batch& b,
                                   inventory::v1::AdjustStockResponse& out) {
  std::string key = LevelKey(r.sku(), r.location());
  auto it = levels_.find(key);
  const Level current = it == levels_.end() ? Level{} : it->second;
  const int64_t on_hand =
      r.mode() == inventory::v1::ADJUST_MODE_SET ? r.quantity() : current.on_hand + r.quantity();
  const bool backorder = r.has_allow_backorder() ? r.allow_backorder() : current.allow_backorder;
  if (on_hand < 0) {
    return absl::FailedPreconditionError(fmt::format(
        "adjustment would make on_hand of sku '{}' at location '{}' negative: on_hand {}, "
        "change {}",
        r.sku(), r.location(), current.on_hand, on_hand - current.on_hand));
  }
  if (!backorder && on_hand < current.reserved) {
    return absl::FailedPreconditionError(fmt::format(
        "adjustment would leave sku '{}' at location '{}' with negative available: on_hand {}, "
        "reserved {}",
        r.sku(), r.location(), on_hand, current.reserved));
  }
  LevelEntry& entry = LevelAt(key);
  const Level& level = entry.second;
  entry.second.allow_backorder = backorder;
  ChangeLevel(b, entry,
              LevelChange{.delta_on_hand = on_hand - current.on_hand,
                          .cause = events::v1::STOCK_CHANGE_CAUSE_ADJUST,
                          .reason = r.reason()},
              out.mutable_level());
  out.set_sequence(level.sequence);
  return absl::OkStatus();
}

absl::Status WriterState::DoReserve(inventory::v1::ReserveRequest& r, Batch& b,
                                    inventory::v1::ReserveResponse& out) {
  AggregatedLines lines = Aggregate(r.lines());
  if (auto s = CheckQuantities(lines); !s.ok()) return s;
  if (auto s = CheckAvailable(lines, "lines"); !s.ok()) return s;
  std::string id = r.reservation_id();
  // A keyed Reserve takes the id its key derives when that is free: the reservation then
  // keeps the key's record, and no separate one is written (idempotency.h).
  const bool keyed_id = id.empty() && keyed_.key != nullptr && keyed_.derived_id_free;
  if (keyed_id) {
    id = std::move(keyed_.derived_id);
  } else if (id.empty()) {
    // Unique by construction: client ids may not use the "rsv-" prefix (validation.cc).
    id = SequencedId(ReservationIdPrefix(), next_sequence_);
  } else if (auto s = CheckReservationIdFree(b, id); !s.ok()) {
    return s;
  }
  auto hold =
      HoldLines(b, lines, std::move(id), r.order_id(), r.ttl_ms(), false, out.mutable_levels());
  if (!hold.ok()) return hold.status();
  FillReservation(**hold, out.mutable_reservation());
  out.set_sequence(next_sequence_ - 1);
  if (keyed_id) RecordKeyInHold(b, **hold, out);
  PutHold(b, **hold);
  return absl::OkStatus();
}

absl::Status WriterState::DoCommit(inventory::v1::CommitRequest& r, Batch& b,
                                   inventory::v1::CommitResponse& out) {
  auto hold = FindOpenHold(b, r.reservation_id());
  if (!hold.ok()) return hold.status();
  if ((*hold)->second.owned_by_order) {
    return absl::FailedPreconditionError(
        fmt::format("reservation '{}' belongs to order '{}'; pay it with OrderService.PayOrder",
                    r.reservation_id(), (*hold)->second.order_id));
  }
  if (auto s = CheckCommittable(**hold); !s.ok()) return s;
  *out.mutable_reservation() =
      CloseHold(b, **hold, inventory::v1::RESERVATION_STATE_COMMITTED,
                events::v1::STOCK_CHANGE_CAUSE_COMMIT, "", out.mutable_levels());
  out.set_sequence(next_sequence_ - 1);
  return absl::OkStatus();
}

absl::Status WriterState::DoRelease(inventory::v1::ReleaseRequest& r, Batch& b,
                                    inventory::v1::ReleaseResponse& out) {
  auto hold = FindOpenHold(b, r.reservation_id());
  if (!hold.ok()) return hold.status();
  if ((*hold)->second.owned_by_order) {
    return absl::FailedPreconditionError(fmt::format(
        "reservation '{}' belongs to order '{}'; cancel it with OrderService.CancelOrder",
        r.reservation_id(), (*hold)->second.order_id));
  }
  *out.mutable_reservation() =
      CloseHold(b, **hold, inventory::v1::RESERVATION_STATE_RELEASED,
                events::v1::STOCK_CHANGE_CAUSE_RELEASE, r.reason(), out.mutable_levels());
  out.set_sequence(next_sequence_ - 1);
  return absl::OkStatus();
}

absl::Status WriterState::DoCreateOrder(order::v1::CreateOrderRequest& r, Batch& b,
                                        order::v1::CreateOrderResponse& out) {
  google::protobuf::RepeatedPtrField<order::v1::OrderLine> all;
  for (const auto& item : r.item_ids()) {
    auto* l = all.Add();
    l->set_sku(item);
    l->set_location(options_.default_location);
    l->set_quantity(1);
  }
  for (const auto& line : r.lines()) *all.Add() = line;
  AggregatedLines lines = Aggregate(all);
  if (auto s = CheckQuantities(lines); !s.ok()) return s;
  if (auto s = CheckAvailable(lines, r.item_ids().empty() ? "lines" : "items"); !s.ok()) return s;

  // Generated the way Reserve generates one; the order's id is the same with "ord-".
  std::string reservation_id = SequencedId(ReservationIdPrefix(), next_sequence_);
  std::string order_id = "ord-" + reservation_id.substr(kGeneratedReservationPrefix.size());
  auto placed =
      HoldLines(b, lines, std::move(reservation_id), order_id, r.hold_ttl_ms(), true, nullptr);
  if (!placed.ok()) return placed.status();
  const OpenHold& hold = **placed;
  PutHold(b, hold);
  Order& order = b.orders[order_id];
  order.set_order_id(order_id);
  order.set_customer_id(r.customer_id());
  for (const auto& line : lines) {
    auto* l = order.add_lines();
    l->set_sku(line.sku.data(), line.sku.size());
    l->set_location(line.location.data(), line.location.size());
    l->set_quantity(line.quantity);
  }
  order.set_total_amount(r.total_amount());
  order.set_reservation_id(hold.first);
  order.set_created_at_ms(b.now_ms);
  order.set_hold_expires_at_ms(hold.second.expires_at_ms);
  SetOrderStatus(b, order, order::v1::ORDER_STATUS_CONFIRMED, "stock held");

  out.set_order_id(order_id);
  out.set_status(std::string(OrderStatusName(order::v1::ORDER_STATUS_CONFIRMED)));
  out.set_timestamp(b.now_ms / 1000);
  out.set_status_code(order::v1::ORDER_STATUS_CONFIRMED);
  out.set_reservation_id(hold.first);
  out.set_hold_expires_at_ms(hold.second.expires_at_ms);
  out.set_sequence(order.sequence());
  return absl::OkStatus();
}

absl::Status WriterState::DoPayOrder(order::v1::PayOrderRequest& r, Batch& b,
                                     order::v1::OrderResponse& out) {
  auto loaded = LoadOrder(b, r.order_id());
  if (!loaded.ok()) return loaded.status();
  Order& order = **loaded;
  if (order.status() != order::v1::ORDER_STATUS_CONFIRMED) {
    return absl::FailedPreconditionError(
        fmt::format("order '{}' is {}; only a CONFIRMED order can be paid", order.order_id(),
                    OrderStatusName(order.status())));
  }
  auto hold = FindOpenHold(b, order.reservation_id());
  if (!hold.ok()) return hold.status();
  if (auto s = CheckCommittable(**hold); !s.ok()) return s;
  CloseHold(b, **hold, inventory::v1::RESERVATION_STATE_COMMITTED,
            events::v1::STOCK_CHANGE_CAUSE_COMMIT, "order paid", nullptr);
  order.set_payment_reference(r.payment_reference());
  SetOrderStatus(b, order, order::v1::ORDER_STATUS_PAID, "payment received");
  events::v1::Event* e = NewEvent(b, event_types::kOrderReceipt, order.order_id());
  auto* receipt = e->mutable_receipt();
  receipt->set_order_id(order.order_id());
  receipt->set_customer_id(order.customer_id());
  *receipt->mutable_lines() = order.lines();
  receipt->set_total_amount(order.total_amount());
  receipt->set_payment_reference(order.payment_reference());
  receipt->set_reservation_id(order.reservation_id());
  *out.mutable_order() = order;
  out.set_sequence(e->sequence());
  return absl::OkStatus();
}

absl::Status WriterState::DoAdvanceOrder(order::v1::AdvanceOrderRequest& r, Batch& b,
                                         order::v1::OrderResponse& out) {
  auto loaded = LoadOrder(b, r.order_id());
  if (!loaded.ok()) return loaded.status();
  Order& order = **loaded;
  const OrderStatus required =
      r.target() == order::v1::ORDER_STATUS_PACKING      ? order::v1::ORDER_STATUS_PAID
      : r.target() == order::v1::ORDER_STATUS_DISPATCHED ? order::v1::ORDER_STATUS_PACKING
                                                         : order::v1::ORDER_STATUS_DISPATCHED;
  if (order.status() != required) {
    return absl::FailedPreconditionError(fmt::format(
        "order '{}' is {}; it can move to {} only from {}", order.order_id(),
        OrderStatusName(order.status()), OrderStatusName(r.target()), OrderStatusName(required)));
  }
  const std::string details =
      r.details().empty() ? fmt::format("order progressed to {}", OrderStatusName(r.target()))
                          : r.details();
  SetOrderStatus(b, order, r.target(), details);
  *out.mutable_order() = order;
  out.set_sequence(order.sequence());
  return absl::OkStatus();
}

absl::Status WriterState::DoCancelOrder(order::v1::CancelOrderRequest& r, Batch& b,
                                        order::v1::OrderResponse& out) {
  auto loaded = LoadOrder(b, r.order_id());
  if (!loaded.ok()) return loaded.status();
  Order& order = **loaded;
  const std::string reason = r.reason().empty() ? "cancelled by request" : r.reason();
  switch (order.status()) {
    case order::v1::ORDER_STATUS_CONFIRMED: {
      auto it = holds_.find(order.reservation_id());
      if (it == holds_.end()) {
        return absl::InternalError(
            fmt::format("order '{}' is CONFIRMED but its hold is not open", order.order_id()));
      }
      CloseHold(b, *it, inventory::v1::RESERVATION_STATE_RELEASED,
                events::v1::STOCK_CHANGE_CAUSE_RELEASE, reason, nullptr);
      break;
    }
    case order::v1::ORDER_STATUS_PAID:
    case order::v1::ORDER_STATUS_PACKING:
      // The units left on_hand at payment; they come back.
      for (const auto& line : order.lines()) {
        ChangeLevel(b, LevelAt(LevelKey(line.sku(), line.location())),
                    LevelChange{.delta_on_hand = line.quantity(),
                                .cause = events::v1::STOCK_CHANGE_CAUSE_RESTOCK,
                                .reservation_id = order.reservation_id(),
                                .order_id = order.order_id(),
                                .reason = reason},
                    nullptr);
      }
      break;
    default:
      return absl::FailedPreconditionError(
          fmt::format("order '{}' is {}; only CONFIRMED, PAID or PACKING orders can be cancelled",
                      order.order_id(), OrderStatusName(order.status())));
  }
  SetOrderStatus(b, order, order::v1::ORDER_STATUS_CANCELLED, reason);
  *out.mutable_order() = order;
  out.set_sequence(order.sequence());
  return absl::OkStatus();
}

void WriterState::DoExpire(Batch& b, ExpireResult& out) {
  b.actor = kExpiryActor;
  std::vector<std::string> due;
  for (auto it = expiry_index_.begin(); it != expiry_index_.end() && it->first <= b.now_ms &&
                                        due.size() < options_.max_expiries_per_sweep;
       ++it) {
    due.emplace_back(it->second);
  }
  for (const auto& id : due) {
    auto it = holds_.find(id);
    if (it == holds_.end()) continue;
    Reservation closed = CloseHold(b, *it, inventory::v1::RESERVATION_STATE_EXPIRED,
                                   events::v1::STOCK_CHANGE_CAUSE_EXPIRE, "hold expired", nullptr);
    ++out.expired_holds;
    if (!closed.owned_by_order()) continue;
    auto order = LoadOrder(b, closed.order_id());
    if (!order.ok()) {
      CoreLogger()->error("expired hold '{}' names order '{}': {}", id, closed.order_id(),
                          order.status().ToString());
      continue;
    }
    if ((*order)->status() == order::v1::ORDER_STATUS_CONFIRMED) {
      SetOrderStatus(b, **order, order::v1::ORDER_STATUS_EXPIRED,
                     "stock hold expired before payment");
      ++out.expired_orders;
    }
  }
  b.actor = {};
}

}  // namespace feed::core

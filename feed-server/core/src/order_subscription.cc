#include "core/order_subscription.h"

#include "core/inventory_core.h"
#include "core/validation.h"
#include "google/protobuf/util/time_util.h"

namespace feed::core {

using google::protobuf::util::TimeUtil;
using order::v1::OrderStatusUpdate;

absl::Status OrderSubscription::Validate(const Limits& limits) const {
  return ValidateId("order_id", order_id_, limits);
}

void OrderSubscription::Start(const order::v1::Order& current) {
  std::deque<OrderStatusUpdate> later;
  for (auto& u : pending_) {
    if (u.sequence() > current.sequence()) later.push_back(std::move(u));
  }
  OrderStatusUpdate first;
  first.set_order_id(current.order_id());
  first.set_status(std::string(OrderStatusName(current.status())));
  first.set_status_code(current.status());
  first.set_details(current.details());
  first.set_sequence(current.sequence());
  first.set_timestamp_ms(current.updated_at_ms());
  later.push_front(std::move(first));
  pending_ = std::move(later);
  covered_through_ = current.sequence();
  started_ = true;
}

void OrderSubscription::Offer(const std::vector<EventPtr>& events) {
  for (const auto& e : events) {
    if (!e->has_order_status_changed() || e->key() != order_id_) continue;
    if (started_ && e->sequence() <= covered_through_) continue;
    const auto& change = e->order_status_changed();
    OrderStatusUpdate u;
    u.set_order_id(change.order_id());
    u.set_status(change.status_name());
    u.set_status_code(change.status());
    u.set_details(change.details());
    u.set_sequence(e->sequence());
    u.set_timestamp_ms(TimeUtil::TimestampToMilliseconds(e->occurred_at()));
    pending_.push_back(std::move(u));
  }
}

std::optional<OrderStatusUpdate> OrderSubscription::Next() {
  if (!started_ || pending_.empty()) return std::nullopt;
  OrderStatusUpdate u = std::move(pending_.front());
  pending_.pop_front();
  return u;
}

bool OrderSubscription::Ends(const OrderStatusUpdate& sent) {
  return IsTerminal(sent.status_code());
}

}  // namespace feed::core

// One StreamOrderUpdates stream's rules, without a network: the order's current status
// first, then every change after it in sequence order, and the end at a terminal status.
//
// Use: Validate; attach to the change feed for the order id; Offer the live events (also
// before Start); Start with the order as read after attaching; send what Next returns and
// end the stream once Ends(update) is true for a sent update. Not thread-safe: the owning
// stream serializes access.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/change_feed.h"
#include "core/options.h"
#include "order/v1/order.pb.h"

namespace feed::core {

class OrderSubscription {
 public:
  explicit OrderSubscription(std::string order_id) : order_id_(std::move(order_id)) {}

  // INVALID_ARGUMENT naming order_id.
  absl::Status Validate(const Limits& limits) const;
  const std::string& order_id() const { return order_id_; }

  // `current` was read after the attachment: changes it already includes are dropped.
  void Start(const order::v1::Order& current);
  void Offer(const std::vector<EventPtr>& events);
  std::optional<order::v1::OrderStatusUpdate> Next();
  // True once `sent` is a terminal status: nothing follows it.
  static bool Ends(const order::v1::OrderStatusUpdate& sent);

  void Clear() { pending_.clear(); }

 private:
  const std::string order_id_;
  std::deque<order::v1::OrderStatusUpdate> pending_;
  uint64_t covered_through_ = 0;
  bool started_ = false;
};

}  // namespace feed::core

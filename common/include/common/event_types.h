// The `type` of each kind of event (events.v1.Event.type, the CloudEvents ce_type): written
// by the core, read by the relay and by consumers.
#pragma once

#include <string_view>

namespace feed::event_types {

inline constexpr std::string_view kStockChanged = "inventory.stock.changed";
inline constexpr std::string_view kOrderStatusChanged = "order.status.changed";
inline constexpr std::string_view kOrderReceipt = "order.receipt";

}  // namespace feed::event_types

#include "output.h"

#include <cstdio>

#include "exit_codes.h"
#include "fmt/format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"

namespace feedctl {

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

void Output::Print(const google::protobuf::Message& message, const std::string& human) const {
  const std::string text = json_ ? ToJson(message) : human;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Output::Line(const std::string& text) const {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string StatusCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : fmt::format("CODE_{}", i);
}

int Output::Error(std::string_view what, const grpc::Status& status) const {
  const std::string code = StatusCodeName(status.error_code());
  if (json_) {
    nlohmann::json error = {
        {"error",
         {{"call", std::string(what)}, {"code", code}, {"message", status.error_message()}}}};
    std::fprintf(stderr, "%s\n", error.dump().c_str());
  } else {
    std::fprintf(stderr, "feedctl: %.*s: %s: %s\n", static_cast<int>(what.size()), what.data(),
                 code.c_str(), status.error_message().c_str());
  }
  return ExitFor(status);
}

std::string Describe(const inventory::v1::StockLevel& l) {
  return fmt::format("{} @ {}: on_hand {}, reserved {}, available {}{} (version {}, sequence {})",
                     l.sku(), l.location(), l.on_hand(), l.reserved(), l.available(),
                     l.allow_backorder() ? ", backorder allowed" : "", l.version(), l.sequence());
}

std::string Describe(const inventory::v1::Reservation& r) {
  std::string lines;
  for (const auto& line : r.lines()) {
    lines += fmt::format("{}{} x {} @ {}", lines.empty() ? "" : ", ", line.quantity(), line.sku(),
                         line.location());
  }
  std::string out = fmt::format(
      "{} {}: {}", r.reservation_id(),
      inventory::v1::ReservationState_Name(r.state()).substr(sizeof("RESERVATION_STATE_") - 1),
      lines);
  if (!r.order_id().empty()) out += fmt::format(" (order {})", r.order_id());
  if (r.state() == inventory::v1::RESERVATION_STATE_HELD) {
    out += fmt::format(
        ", expires at {}",
        google::protobuf::util::TimeUtil::ToString(
            google::protobuf::util::TimeUtil::MillisecondsToTimestamp(r.expires_at_ms())));
  } else if (!r.close_reason().empty()) {
    out += fmt::format(", {}", r.close_reason());
  }
  return out;
}

std::string Describe(const order::v1::Order& o) {
  std::string lines;
  for (const auto& line : o.lines()) {
    lines += fmt::format("{}{} x {} @ {}", lines.empty() ? "" : ", ", line.quantity(), line.sku(),
                         line.location());
  }
  return fmt::format("{} {} for {}: {}; total {:.2f}; reservation {}{}", o.order_id(),
                     order::v1::OrderStatus_Name(o.status()).substr(sizeof("ORDER_STATUS_") - 1),
                     o.customer_id(), lines, o.total_amount(), o.reservation_id(),
                     o.details().empty() ? "" : "; " + o.details());
}

std::string Describe(const events::v1::Event& e) {
  std::string what;
  switch (e.payload_case()) {
    case events::v1::Event::kStockChanged: {
      const auto& c = e.stock_changed();
      what = fmt::format(
          "location={} on_hand={} reserved={} available={} delta_on_hand={} delta_reserved={} "
          "cause={}",
          c.level().location(), c.level().on_hand(), c.level().reserved(), c.level().available(),
          c.delta_on_hand(), c.delta_reserved(), events::v1::StockChangeCause_Name(c.cause()));
      break;
    }
    case events::v1::Event::kOrderStatusChanged:
      what = fmt::format("order={} status={}", e.order_status_changed().order_id(),
                         e.order_status_changed().status_name());
      break;
    case events::v1::Event::kReceipt:
      what = fmt::format("order={} customer={} lines={} total={}", e.receipt().order_id(),
                         e.receipt().customer_id(), e.receipt().lines_size(),
                         e.receipt().total_amount());
      break;
    case events::v1::Event::PAYLOAD_NOT_SET:
      what = "payload=none";
      break;
  }
  return fmt::format("seq={} id={} type={} key={} time={} {}", e.sequence(), e.event_id(), e.type(),
                     e.key(), google::protobuf::util::TimeUtil::ToString(e.occurred_at()), what);
}

}  // namespace feedctl

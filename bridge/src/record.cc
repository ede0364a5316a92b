#include "record.h"

#include "common/event_types.h"
#include "fmt/format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace feed::bridge::internal {

const std::string& TopicName(const RelayOptions& options, TopicKind kind) {
  switch (kind) {
    case TopicKind::kStock:
      return options.stock_topic;
    case TopicKind::kOrderStatus:
      return options.order_status_topic;
    case TopicKind::kReceipt:
      return options.receipt_topic;
  }
  return options.stock_topic;
}

TopicKind TopicFor(const events::v1::Event& event, bool* routed) {
  *routed = true;
  switch (event.payload_case()) {
    case events::v1::Event::kStockChanged:
      return TopicKind::kStock;
    case events::v1::Event::kOrderStatusChanged:
      return TopicKind::kOrderStatus;
    case events::v1::Event::kReceipt:
      return TopicKind::kReceipt;
    case events::v1::Event::PAYLOAD_NOT_SET:
      break;
  }
  const std::string_view type = event.type();
  if (type == event_types::kStockChanged) return TopicKind::kStock;
  if (type == event_types::kOrderStatusChanged) return TopicKind::kOrderStatus;
  if (type == event_types::kOrderReceipt) return TopicKind::kReceipt;
  *routed = false;
  return TopicKind::kStock;
}

std::string Rfc3339(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() < google::protobuf::util::TimeUtil::kTimestampMinSeconds ||
      ts.seconds() > google::protobuf::util::TimeUtil::kTimestampMaxSeconds || ts.nanos() < 0 ||
      ts.nanos() > 999'999'999) {
    return "1970-01-01T00:00:00Z";  // out of range: TimeUtil would not print it
  }
  return google::protobuf::util::TimeUtil::ToString(ts);
}

Record BuildRecord(const events::v1::Event& event, uint64_t sequence, std::string_view stored,
                   const RelayOptions& options) {
  Record r;
  r.topic = TopicFor(event, &r.routed);
  r.key = event.key();
  r.occurred_at_ms = google::protobuf::util::TimeUtil::TimestampToMilliseconds(event.occurred_at());
  std::string_view content_type = kContentTypeProtobuf;
  bool json = false;
  if (options.json_values) {
    google::protobuf::util::JsonPrintOptions print;
    json = google::protobuf::util::MessageToJsonString(event, &r.value, print).ok();
    if (json) content_type = kContentTypeJson;
  }
  if (!json) r.value.assign(stored.data(), stored.size());
  r.headers.reserve(8);
  r.headers.emplace_back("ce_id", event.event_id());
  r.headers.emplace_back("ce_type", event.type());
  r.headers.emplace_back("ce_source", options.ce_source);
  r.headers.emplace_back("ce_time", Rfc3339(event.occurred_at()));
  r.headers.emplace_back("ce_specversion", "1.0");
  r.headers.emplace_back("content-type", std::string(content_type));
  r.headers.emplace_back("sequence", fmt::format("{}", sequence));
  // Who made the change (the event's `actor`): answerable without decoding the value.
  if (!event.actor().empty()) r.headers.emplace_back("actor", event.actor());
  return r;
}

}  // namespace feed::bridge::internal

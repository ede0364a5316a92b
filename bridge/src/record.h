// How an outbox entry becomes a Kafka record: topic, key, value and CloudEvents headers.
// Pure functions (no librdkafka), so they are testable without a broker.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bridge/relay.h"
#include "events/v1/events.pb.h"

namespace feed::bridge::internal {

enum class TopicKind : int { kStock = 0, kOrderStatus = 1, kReceipt = 2 };
inline constexpr int kTopicKindCount = 3;

inline constexpr std::string_view kContentTypeProtobuf = "application/protobuf";
inline constexpr std::string_view kContentTypeJson = "application/json";

struct Record {
  TopicKind topic = TopicKind::kStock;
  // False when neither the payload nor the type named a topic (routed to the stock topic).
  bool routed = true;
  std::string key;
  // The stored bytes (protobuf mode) or the event's JSON mapping (json_values).
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t occurred_at_ms = 0;
};

const std::string& TopicName(const RelayOptions& options, TopicKind kind);

// The topic for an event: by payload; an event without a known payload is routed by its type
// string; failing both, to the stock topic (Record::routed = false, the caller logs it).
TopicKind TopicFor(const events::v1::Event& event, bool* routed);

// RFC 3339 in UTC ("2024-05-01T12:00:00.250Z"; 0, 3, 6 or 9 fractional digits).
std::string Rfc3339(const google::protobuf::Timestamp& ts);

// The record for the outbox entry at `sequence` whose stored bytes `stored` parsed as `event`.
// With json_values, a value that cannot be printed as JSON falls back to the protobuf bytes
// (and says so in content-type) rather than failing the record.
Record BuildRecord(const events::v1::Event& event, uint64_t sequence, std::string_view stored,
                   const RelayOptions& options);

}  // namespace feed::bridge::internal

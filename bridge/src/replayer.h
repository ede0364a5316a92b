// The work of Relay::Replay once the request is checked: read the kept events of the range
// from the journal in chunks and produce them again, as the live relay built them (record.h:
// same topic, key, value, headers, event id; timestamp = commit time), with a producer of
// their own, at a bounded rate; then wait for every acknowledgement.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "bridge/relay.h"
#include "kafka_handles.h"
#include "storage/store.h"

namespace feed::bridge::internal {

struct ReplayPlan {
  ConfHandle conf;            // the client configuration, without a delivery callback; consumed
  uint64_t from = 0, to = 0;  // inclusive, both kept
  std::string topic;          // empty: every topic
  uint32_t max_records_per_second = 10000;
  int64_t flush_timeout_ms = 60000;
};

absl::StatusOr<ReplayResult> RunReplay(ReplayPlan plan, const storage::ReadView& journal,
                                       const RelayOptions& options);

}  // namespace feed::bridge::internal

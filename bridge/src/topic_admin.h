// Creating the relay's topics when they are missing (librdkafka's admin API).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/log_rate_limit.h"
#include "kafka_handles.h"
#include "spdlog/spdlog.h"

namespace feed::bridge::internal {

struct TopicsOutcome {
  bool answered = false;  // the broker answered the request (so it is reachable)
  // Every topic is created, exists, or is not ours to create (producing will tell); false:
  // try again later.
  bool ready = false;
};

struct TopicsRequest {
  std::vector<std::string> names;
  int partitions = 3;
  int replication_factor = 1;
  int timeout_ms = 5000;  // request and operation timeouts
};

// Sends one CreateTopics request on `producer` and waits for its answer in short slices,
// calling `serve` meanwhile (the relay keeps serving its own queue) and giving up when
// `stopping` says so. Logs what it finds; "not yet" lines through `retry_log`. Runs on the
// relay thread.
TopicsOutcome CreateTopics(rd_kafka_t* producer, const TopicsRequest& request,
                           const std::function<void()>& serve,
                           const std::function<bool()>& stopping, spdlog::logger& log,
                           LogRateLimit& retry_log);

}  // namespace feed::bridge::internal

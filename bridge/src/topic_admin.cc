#include "topic_admin.h"

#include <chrono>

namespace feed::bridge::internal {
namespace {

bool RetriableAdminError(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_CONTROLLER:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    // A cluster that is still starting may have fewer live brokers than the replication factor.
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
      return true;
    default:
      return false;
  }
}

}  // namespace

TopicsOutcome CreateTopics(rd_kafka_t* producer, const TopicsRequest& request,
                           const std::function<void()>& serve,
                           const std::function<bool()>& stopping, spdlog::logger& log,
                           LogRateLimit& retry_log) {
  uint64_t suppressed = 0;
  char err[512];
  std::vector<NewTopicHandle> topics;
  std::vector<rd_kafka_NewTopic_t*> raw;
  for (const auto& name : request.names) {
    NewTopicHandle t(rd_kafka_NewTopic_new(name.c_str(), request.partitions,
                                           request.replication_factor, err, sizeof err));
    if (t == nullptr) {
      log.error("relay: cannot describe topic {} for creation: {}; producing to it anyway", name,
                err);
      continue;
    }
    raw.push_back(t.get());
    topics.push_back(std::move(t));
  }
  if (topics.empty()) return TopicsOutcome{.ready = true};
  AdminOptionsHandle admin(rd_kafka_AdminOptions_new(producer, RD_KAFKA_ADMIN_OP_CREATETOPICS));
  rd_kafka_AdminOptions_set_request_timeout(admin.get(), request.timeout_ms, err, sizeof err);
  rd_kafka_AdminOptions_set_operation_timeout(admin.get(), request.timeout_ms, err, sizeof err);
  QueueHandle queue(rd_kafka_queue_new(producer));
  rd_kafka_CreateTopics(producer, raw.data(), raw.size(), admin.get(), queue.get());

  // Short slices, so that a dead broker does not hold up Shutdown.
  EventHandle ev;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * request.timeout_ms + 1000);
  while (ev == nullptr && !stopping() && std::chrono::steady_clock::now() < deadline) {
    ev.reset(rd_kafka_queue_poll(queue.get(), 100));
    serve();
  }
  if (ev == nullptr) {
    if (!stopping() && retry_log.Allow(&suppressed)) {
      log.warn("relay: no answer to the topic creation request; retrying");
    }
    return TopicsOutcome{};
  }
  if (rd_kafka_event_error(ev.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (retry_log.Allow(&suppressed)) {
      log.warn("relay: cannot create topics yet ({}); retrying ({} similar suppressed)",
               rd_kafka_event_error_string(ev.get()), suppressed);
    }
    return TopicsOutcome{};
  }
  TopicsOutcome outcome{.answered = true, .ready = true};
  size_t count = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &count);
  for (size_t i = 0; i < count; ++i) {
    const char* name = rd_kafka_topic_result_name(results[i]);
    const rd_kafka_resp_err_t e = rd_kafka_topic_result_error(results[i]);
    const char* msg = rd_kafka_topic_result_error_string(results[i]);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
      log.info("relay: created topic {} ({} partitions, replication factor {})", name,
               request.partitions, request.replication_factor);
    } else if (e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      log.debug("relay: topic {} exists", name);
    } else if (RetriableAdminError(e)) {
      outcome.ready = false;
      if (retry_log.Allow(&suppressed)) {
        log.warn("relay: cannot create topic {} yet ({}: {}); retrying", name, rd_kafka_err2name(e),
                 msg != nullptr ? msg : "");
      }
    } else {
      // Not ours to fix (e.g. no permission: an operator manages the topics). Producing
      // shows whether the topic is usable; a failed delivery is retried anyway.
      log.error("relay: cannot create topic {} ({}: {}); producing to it anyway", name,
                rd_kafka_err2name(e), msg != nullptr ? msg : "");
    }
  }
  return outcome;
}

}  // namespace feed::bridge::internal

#include "replayer.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "journal_reader.h"
#include "record.h"

namespace feed::bridge::internal {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = 1000;  // events read per journal scan

struct Counters {
  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> failed{0};
  rd_kafka_resp_err_t first_error = RD_KAFKA_RESP_ERR_NO_ERROR;  // the polling thread's
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* msg, void*) {
  auto* counters = static_cast<Counters*>(msg->_private);
  if (counters == nullptr) return;
  if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
      rd_kafka_message_status(msg) == RD_KAFKA_MSG_STATUS_PERSISTED) {
    counters->delivered.fetch_add(1, std::memory_order_relaxed);
  } else {
    counters->failed.fetch_add(1, std::memory_order_relaxed);
    if (counters->first_error == RD_KAFKA_RESP_ERR_NO_ERROR) counters->first_error = msg->err;
  }
}

}  // namespace

absl::StatusOr<ReplayResult> RunReplay(ReplayPlan plan, const storage::ReadView& journal,
                                       const RelayOptions& options) {
  char err[512];
  rd_kafka_conf_set_dr_msg_cb(plan.conf.get(), &OnDelivery);
  ProducerHandle rk(rd_kafka_new(RD_KAFKA_PRODUCER, plan.conf.get(), err, sizeof err));
  if (rk == nullptr) {
    return absl::InvalidArgumentError(fmt::format("replay: cannot create a producer: {}", err));
  }
  (void)plan.conf.release();
  TopicHandle topics[kTopicKindCount];
  for (int i = 0; i < kTopicKindCount; ++i) {
    topics[i].reset(rd_kafka_topic_new(
        rk.get(), TopicName(options, static_cast<TopicKind>(i)).c_str(), nullptr));
  }
  Counters counters;
  ReplayResult result;
  result.first_sequence = plan.from;
  result.last_sequence = plan.to;
  const auto began = Clock::now();
  uint64_t next = plan.from;
  std::vector<std::pair<uint64_t, std::string>> chunk;
  while (next <= plan.to) {
    chunk.clear();
    JournalVisitor visitor;
    visitor.event = [&](uint64_t sequence, std::string_view bytes) {
      if (sequence > plan.to) return false;
      chunk.emplace_back(sequence, std::string(bytes));
      return chunk.size() < kChunk;
    };
    visitor.corrupt = [](uint64_t, std::string_view) { return true; };
    if (absl::Status s = ReadJournal(journal, next, visitor); !s.ok()) return s;
    if (chunk.empty()) break;
    for (const auto& [sequence, bytes] : chunk) {
      next = sequence + 1;
      events::v1::Event event;
      if (!event.ParseFromString(bytes)) continue;  // the live relay skipped it too
      Record r = BuildRecord(event, sequence, bytes, options);
      if (!plan.topic.empty() && TopicName(options, r.topic) != plan.topic) {
        ++result.skipped_other_topics;
        continue;
      }
      HeadersHandle headers(rd_kafka_headers_new(r.headers.size()));
      for (const auto& [name, value] : r.headers) {
        rd_kafka_header_add(headers.get(), name.data(), static_cast<ssize_t>(name.size()),
                            value.data(), static_cast<ssize_t>(value.size()));
      }
      for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk.get(), RD_KAFKA_V_RKT(topics[static_cast<int>(r.topic)].get()),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(r.key.empty() ? nullptr : r.key.data(), r.key.size()),
            RD_KAFKA_V_VALUE(r.value.data(), r.value.size()), RD_KAFKA_V_HEADERS(headers.get()),
            RD_KAFKA_V_TIMESTAMP(r.occurred_at_ms > 0 ? r.occurred_at_ms : 0),
            RD_KAFKA_V_OPAQUE(&counters), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
          (void)headers.release();
          break;
        }
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
          rd_kafka_flush(rk.get(), 1000);
          return absl::UnavailableError(
              fmt::format("replay: cannot produce sequence {}: {}", sequence, rd_kafka_err2str(e)));
        }
        rd_kafka_poll(rk.get(), 10);
      }
      ++result.records_sent;
      rd_kafka_poll(rk.get(), 0);
      // At most max_records_per_second: wait until this record's slot has come.
      const auto due = began + std::chrono::microseconds(result.records_sent * 1'000'000 /
                                                         plan.max_records_per_second);
      if (due > Clock::now()) std::this_thread::sleep_until(due);
    }
  }
  result.last_sequence = next > plan.from ? next - 1 : plan.from;
  rd_kafka_flush(rk.get(), static_cast<int>(plan.flush_timeout_ms));
  result.records_delivered = counters.delivered.load();
  const uint64_t unacknowledged = result.records_sent - result.records_delivered;
  if (unacknowledged > 0) {
    // Purge what is left, so that its delivery reports do not outlive `counters`.
    rd_kafka_purge(rk.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(rk.get(), 5000);
    return absl::UnavailableError(fmt::format(
        "replay: {} of {} records were not acknowledged ({}); run it again: consumers see the "
        "same event ids",
        unacknowledged, result.records_sent,
        counters.first_error != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_err2str(counters.first_error)
                                                           : "timed out"));
  }
  return result;
}

}  // namespace feed::bridge::internal

#include "tail_check.h"

#include <chrono>
#include <map>

#include "fmt/format.h"

namespace feed::bridge::internal {
namespace {

using Clock = std::chrono::steady_clock;

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

absl::Status Timeout(std::string_view what) {
  return absl::DeadlineExceededError(fmt::format("tail check: {} did not finish in time", what));
}

}  // namespace

absl::StatusOr<TailCheckResult> ReadDeliveredIds(TailCheckRequest request) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(request.timeout_ms);
  char err[512];
  for (const auto& [k, v] : std::initializer_list<std::pair<const char*, const char*>>{
           {"group.id", "feed-relay-tail-check"},  // never joins: partitions are assigned
           {"enable.auto.commit", "false"},
           {"enable.partition.eof", "false"},
           {"auto.offset.reset", "earliest"}}) {
    if (rd_kafka_conf_set(request.conf.get(), k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
      return absl::InvalidArgumentError(fmt::format("tail check: {}: {}", k, err));
    }
  }
  ProducerHandle rk(rd_kafka_new(RD_KAFKA_CONSUMER, request.conf.get(), err, sizeof err));
  if (rk == nullptr) {
    return absl::InvalidArgumentError(fmt::format("tail check: cannot create a consumer: {}", err));
  }
  (void)request.conf.release();  // rd_kafka_new owns it now
  rd_kafka_poll_set_consumer(rk.get());

  // Where to start in each partition, and where its end is now.
  PartitionListHandle start(rd_kafka_topic_partition_list_new(16));
  std::map<std::pair<std::string, int32_t>, int64_t> end;
  for (const auto& topic : request.topics) {
    TopicHandle t(rd_kafka_topic_new(rk.get(), topic.c_str(), nullptr));
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk.get(), 0, t.get(), &md, RemainingMs(deadline));
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return absl::UnavailableError(
          fmt::format("tail check: metadata of {}: {}", topic, rd_kafka_err2str(e)));
    }
    MetadataHandle owned(md);
    if (owned->topic_cnt < 1 || owned->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    for (int i = 0; i < owned->topics[0].partition_cnt; ++i) {
      const int32_t p = owned->topics[0].partitions[i].id;
      int64_t low = 0, high = 0;
      e = rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &low, &high,
                                           RemainingMs(deadline));
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return absl::UnavailableError(
            fmt::format("tail check: offsets of {}/{}: {}", topic, p, rd_kafka_err2str(e)));
      }
      if (high <= low) continue;
      end[{topic, p}] = high;
      rd_kafka_topic_partition_list_add(start.get(), topic.c_str(), p)->offset = request.since_ms;
    }
  }
  TailCheckResult result;
  if (start->cnt == 0) return result;
  rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rk.get(), start.get(), RemainingMs(deadline));
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        fmt::format("tail check: offsets for times: {}", rd_kafka_err2str(e)));
  }
  // Partitions with nothing since since_ms (offset -1, the end) are not read.
  PartitionListHandle assign(rd_kafka_topic_partition_list_new(start->cnt));
  for (int i = 0; i < start->cnt; ++i) {
    const auto& tp = start->elems[i];
    if (tp.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return absl::UnavailableError(fmt::format("tail check: offset of {}/{}: {}", tp.topic,
                                                tp.partition, rd_kafka_err2str(tp.err)));
    }
    if (tp.offset < 0 || tp.offset >= end[{tp.topic, tp.partition}]) {
      end.erase({tp.topic, tp.partition});
      continue;
    }
    rd_kafka_topic_partition_list_add(assign.get(), tp.topic, tp.partition)->offset = tp.offset;
  }
  for (auto it = end.begin(); it != end.end();) {  // only the assigned ones are awaited
    bool assigned = false;
    for (int i = 0; i < assign->cnt; ++i) {
      assigned |= assign->elems[i].topic == it->first.first &&
                  assign->elems[i].partition == it->first.second;
    }
    it = assigned ? std::next(it) : end.erase(it);
  }
  result.partitions = assign->cnt;
  if (assign->cnt == 0) return result;
  if ((e = rd_kafka_assign(rk.get(), assign.get())) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InternalError(fmt::format("tail check: assign: {}", rd_kafka_err2str(e)));
  }
  while (!end.empty()) {
    if (RemainingMs(deadline) == 0) {
      rd_kafka_consumer_close(rk.get());
      return Timeout("reading the topics");
    }
    MessageHandle msg(rd_kafka_consumer_poll(rk.get(), std::min(100, RemainingMs(deadline))));
    if (msg == nullptr) continue;
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
      rd_kafka_consumer_close(rk.get());
      return absl::UnavailableError(
          fmt::format("tail check: reading: {}", rd_kafka_message_errstr(msg.get())));
    }
    ++result.records;
    rd_kafka_headers_t* headers = nullptr;  // owned by the message
    const void* value = nullptr;
    size_t size = 0;
    if (rd_kafka_message_headers(msg.get(), &headers) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        rd_kafka_header_get_last(headers, "ce_id", &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        value != nullptr) {
      result.ids.emplace(static_cast<const char*>(value), size);
    }
    auto it = end.find({rd_kafka_topic_name(msg->rkt), msg->partition});
    if (it != end.end() && msg->offset + 1 >= it->second) end.erase(it);
  }
  rd_kafka_consumer_close(rk.get());
  return result;
}

}  // namespace feed::bridge::internal

#include "bridge/shard_log.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "fmt/format.h"
#include "kafka_handles.h"
#include "kafka_security.h"
#include "logging.h"

namespace feed::bridge {
namespace {

using internal::ConfHandle;
using internal::MessageHandle;
using internal::PartitionListHandle;
using internal::ProducerHandle;
using Clock = std::chrono::steady_clock;

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

void OnLog(const rd_kafka_t*, int level, const char* facility, const char* message) {
  // syslog levels: 0-3 errors, 4 warnings, the rest informational.
  const auto spd = level <= 3   ? spdlog::level::err
                   : level == 4 ? spdlog::level::warn
                                : spdlog::level::debug;
  internal::BridgeLogger()->log(spd, "shard log: kafka {}: {}", facility, message);
}

// The password of one client, kept current from its file (Refresh on the client's thread).
absl::StatusOr<std::unique_ptr<internal::SaslPassword>> OpenPassword(
    const ShardLogOptions& options) {
  return internal::SaslPassword::Open(options.security, options.kafka_properties,
                                      std::chrono::milliseconds(options.credentials_check_ms),
                                      "shard log");
}

absl::StatusOr<ConfHandle> ClientConf(const ShardLogOptions& options, bool producer,
                                      const internal::SaslPassword& password) {
  ConfHandle conf(rd_kafka_conf_new());
  std::vector<std::pair<std::string, std::string>> props = {
      {"bootstrap.servers", options.brokers}, {"client.id", options.client_id},
      {"log.connection.close", "false"},      {"reconnect.backoff.ms", "100"},
      {"reconnect.backoff.max.ms", "2000"},
  };
  if (producer) {
    props.insert(props.end(),
                 {
                     // Replicated before acknowledged, in order, without duplicates.
                     {"enable.idempotence", "true"},
                     {"acks", "all"},
                     {"linger.ms", "1"},
                     {"compression.type", "lz4"},
                     {"message.timeout.ms", fmt::format("{}", options.append_timeout_ms)},
                 });
  } else {
    props.insert(props.end(), {
                                  {"group.id", "feed-shard-log"},  // never joins: assigned
                                  {"enable.auto.commit", "false"},
                                  {"enable.partition.eof", "false"},
                                  {"fetch.wait.max.ms", "100"},
                              });
  }
  if (absl::Status s = internal::ConfigureClient(conf.get(), std::move(props), options.security,
                                                 options.kafka_properties, password, "shard log");
      !s.ok()) {
    return s;
  }
  rd_kafka_conf_set_log_cb(conf.get(), &OnLog);
  return conf;
}

absl::StatusOr<ProducerHandle> NewClient(ConfHandle conf, rd_kafka_type_t type) {
  char err[512];
  ProducerHandle rk(rd_kafka_new(type, conf.get(), err, sizeof err));
  if (rk == nullptr) {
    return absl::InvalidArgumentError(fmt::format("shard log: cannot create a client: {}", err));
  }
  (void)conf.release();  // rd_kafka_new owns it now
  return rk;
}

// The topic's partition count, or nothing when it does not exist or a partition has no
// leader yet (just created).
absl::StatusOr<std::optional<int>> PartitionCount(rd_kafka_t* rk, const std::string& topic,
                                                  int timeout_ms) {
  internal::TopicHandle t(rd_kafka_topic_new(rk, topic.c_str(), nullptr));
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, t.get(), &md, timeout_ms);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        fmt::format("shard log: metadata of {}: {}", topic, rd_kafka_err2str(e)));
  }
  internal::MetadataHandle owned(md);
  if (owned->topic_cnt < 1 || owned->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR ||
      owned->topics[0].partition_cnt == 0) {
    return std::optional<int>();
  }
  for (int i = 0; i < owned->topics[0].partition_cnt; ++i) {
    const rd_kafka_metadata_partition_t& p = owned->topics[0].partitions[i];
    if (p.err != RD_KAFKA_RESP_ERR_NO_ERROR || p.leader < 0) return std::optional<int>();
  }
  return std::optional<int>(owned->topics[0].partition_cnt);
}

// Errors a partition's leader change or a new topic gives for a while.
bool Retriable(rd_kafka_resp_err_t e) {
  return e == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
         e == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
         e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || e == RD_KAFKA_RESP_ERR__TRANSPORT ||
         e == RD_KAFKA_RESP_ERR__TIMED_OUT;
}

class KafkaShardLogWriter final : public ShardLogWriter {
 public:
  explicit KafkaShardLogWriter(std::string topic) : topic_(std::move(topic)) {}

  absl::Status Start(const ShardLogOptions& options) {
    auto password = OpenPassword(options);
    if (!password.ok()) return password.status();
    password_ = std::move(*password);
    auto conf = ClientConf(options, /*producer=*/true, *password_);
    if (!conf.ok()) return conf.status();
    rd_kafka_conf_set_dr_msg_cb(conf->get(), &OnDelivery);
    auto rk = NewClient(std::move(*conf), RD_KAFKA_PRODUCER);
    if (!rk.ok()) return rk.status();
    rk_ = std::move(*rk);
    topic_handle_.reset(rd_kafka_topic_new(rk_.get(), topic_.c_str(), nullptr));
    poller_ = std::thread([this] {
      while (!stop_.load(std::memory_order_acquire)) {
        rd_kafka_poll(rk_.get(), 50);
        password_->Refresh(rk_.get());
      }
    });
    flush_ms_ = static_cast<int>(options.append_timeout_ms);
    return absl::OkStatus();
  }

  ~KafkaShardLogWriter() override {
    if (rk_ == nullptr) return;
    // Every append gets its outcome: delivered, or failed by the purge.
    rd_kafka_flush(rk_.get(), flush_ms_);
    rd_kafka_purge(rk_.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    stop_.store(true, std::memory_order_release);
    poller_.join();
    rd_kafka_poll(rk_.get(), 0);  // the purged records' reports
    topic_handle_.reset();
  }

  void Append(int32_t shard, std::string_view value, Done done) override {
    auto* owned = new Done(std::move(done));
    const int rc =
        rd_kafka_produce(topic_handle_.get(), shard, RD_KAFKA_MSG_F_COPY,
                         const_cast<char*>(value.data()), value.size(), nullptr, 0, owned);
    if (rc != 0) {
      const rd_kafka_resp_err_t e = rd_kafka_last_error();
      (*owned)(absl::UnavailableError(fmt::format("shard log: cannot append to {}/{}: {}", topic_,
                                                  shard, rd_kafka_err2str(e))));
      delete owned;
    }
  }

 private:
  static void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* msg, void*) {
    std::unique_ptr<Done> done(static_cast<Done*>(msg->_private));
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      (*done)(absl::UnavailableError(fmt::format("shard log: append to {}/{} failed: {}",
                                                 rd_kafka_topic_name(msg->rkt), msg->partition,
                                                 rd_kafka_err2str(msg->err))));
    } else {
      (*done)(msg->offset);
    }
  }

  const std::string topic_;
  std::unique_ptr<internal::SaslPassword> password_;  // the poller's
  ProducerHandle rk_;
  internal::TopicHandle topic_handle_;
  std::atomic<bool> stop_{false};
  std::thread poller_;
  int flush_ms_ = 0;
};

class KafkaShardLogReader final : public ShardLogReader {
 public:
  explicit KafkaShardLogReader(std::string topic) : topic_(std::move(topic)) {}

  absl::Status Start(const ShardLogOptions& options,
                     const std::vector<std::pair<int32_t, int64_t>>& from) {
    auto password = OpenPassword(options);
    if (!password.ok()) return password.status();
    password_ = std::move(*password);
    auto conf = ClientConf(options, /*producer=*/false, *password_);
    if (!conf.ok()) return conf.status();
    auto rk = NewClient(std::move(*conf), RD_KAFKA_CONSUMER);
    if (!rk.ok()) return rk.status();
    rk_ = std::move(*rk);
    rd_kafka_poll_set_consumer(rk_.get());
    PartitionListHandle assign(rd_kafka_topic_partition_list_new(static_cast<int>(from.size())));
    for (const auto& [shard, offset] : from) {
      rd_kafka_topic_partition_list_add(assign.get(), topic_.c_str(), shard)->offset =
          offset == kFromBeginning ? RD_KAFKA_OFFSET_BEGINNING : offset;
    }
    const rd_kafka_resp_err_t e = rd_kafka_assign(rk_.get(), assign.get());
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return absl::InternalError(fmt::format("shard log: assign: {}", rd_kafka_err2str(e)));
    }
    return absl::OkStatus();
  }

  ~KafkaShardLogReader() override {
    if (rk_ != nullptr) rd_kafka_consumer_close(rk_.get());
  }

  absl::StatusOr<std::vector<LoggedRecord>> Poll(int64_t timeout_ms, size_t max) override {
    password_->Refresh(rk_.get());
    std::vector<LoggedRecord> records;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (records.size() < max) {
      // Waits only for the first record; then takes what has arrived.
      const int wait = records.empty() ? RemainingMs(deadline) : 0;
      MessageHandle msg(rd_kafka_consumer_poll(rk_.get(), wait));
      if (msg == nullptr) {
        if (!records.empty() || wait == 0) break;
        continue;
      }
      if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (msg->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
            msg->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
            msg->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
          return absl::UnavailableError(
              fmt::format("shard log: reading {}: {}", topic_, rd_kafka_message_errstr(msg.get())));
        }
        continue;  // transport trouble: librdkafka retries
      }
      records.push_back(
          LoggedRecord{msg->partition, msg->offset,
                       std::string(static_cast<const char*>(msg->payload), msg->len)});
    }
    return records;
  }

  absl::StatusOr<int64_t> EndOffset(int32_t shard, int64_t timeout_ms) override {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int64_t low = 0, high = 0;
      const rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
          rk_.get(), topic_.c_str(), shard, &low, &high, std::max(1, RemainingMs(deadline)));
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) return high;
      if (!Retriable(e) || RemainingMs(deadline) == 0) {
        return absl::UnavailableError(
            fmt::format("shard log: end of {}/{}: {}", topic_, shard, rd_kafka_err2str(e)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  const std::string topic_;
  std::unique_ptr<internal::SaslPassword> password_;  // Poll's
  ProducerHandle rk_;
};

}  // namespace

absl::Status EnsureShardLogTopic(const ShardLogOptions& options, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto password = OpenPassword(options);
  if (!password.ok()) return password.status();
  auto conf = ClientConf(options, /*producer=*/true, **password);
  if (!conf.ok()) return conf.status();
  auto rk = NewClient(std::move(*conf), RD_KAFKA_PRODUCER);
  if (!rk.ok()) return rk.status();
  auto existing = PartitionCount(rk->get(), options.topic, RemainingMs(deadline));
  if (!existing.ok()) return existing.status();
  if (!existing->has_value()) {
    char err[512];
    internal::NewTopicHandle topic(rd_kafka_NewTopic_new(
        options.topic.c_str(), options.shards, options.replication_factor, err, sizeof err));
    if (topic == nullptr) {
      return absl::InvalidArgumentError(fmt::format("shard log: topic {}: {}", options.topic, err));
    }
    rd_kafka_NewTopic_set_config(topic.get(), "unclean.leader.election.enable", "false");
    // Kept for good: a standby or a new node rebuilds a shard from the log's first record
    // (no snapshots yet, docs/CLUSTER.md).
    rd_kafka_NewTopic_set_config(topic.get(), "retention.ms", "-1");
    rd_kafka_NewTopic_set_config(topic.get(), "retention.bytes", "-1");
    rd_kafka_NewTopic_set_config(topic.get(), "min.insync.replicas",
                                 fmt::format("{}", options.min_insync_replicas).c_str());
    internal::QueueHandle queue(rd_kafka_queue_new(rk->get()));
    rd_kafka_NewTopic_t* topics[] = {topic.get()};
    rd_kafka_CreateTopics(rk->get(), topics, 1, nullptr, queue.get());
    internal::EventHandle event(rd_kafka_queue_poll(queue.get(), RemainingMs(deadline)));
    if (event == nullptr) {
      return absl::UnavailableError(
          fmt::format("shard log: creating {}: no answer from the brokers", options.topic));
    }
    const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event.get());
    size_t count = 0;
    const rd_kafka_topic_result_t** results =
        result == nullptr ? nullptr : rd_kafka_CreateTopics_result_topics(result, &count);
    const rd_kafka_resp_err_t e =
        count == 1 ? rd_kafka_topic_result_error(results[0]) : rd_kafka_event_error(event.get());
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      return absl::UnavailableError(
          fmt::format("shard log: creating {}: {}", options.topic, rd_kafka_err2str(e)));
    }
    // Created (or by another node meanwhile): its partitions are checked below, once each
    // has a leader.
    for (;;) {
      existing = PartitionCount(rk->get(), options.topic, RemainingMs(deadline));
      if (!existing.ok()) return existing.status();
      if (existing->has_value()) break;
      if (RemainingMs(deadline) == 0) {
        return absl::UnavailableError(
            fmt::format("shard log: {} created but not visible in time", options.topic));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (**existing != options.shards) {
    return absl::FailedPreconditionError(
        fmt::format("shard log: topic {} has {} partitions but the cluster has {} shards; the "
                    "shard count is fixed when the cluster is created",
                    options.topic, **existing, options.shards));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardLogWriter>> ShardLogWriter::Open(
    const ShardLogOptions& options) {
  auto writer = std::make_unique<KafkaShardLogWriter>(options.topic);
  if (absl::Status started = writer->Start(options); !started.ok()) return started;
  return writer;
}

absl::StatusOr<int64_t> ShardLogWriter::AppendAndWait(int32_t shard, std::string_view value) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<absl::StatusOr<int64_t>> outcome;
  Append(shard, value, [&](absl::StatusOr<int64_t> offset) {
    std::lock_guard lock(mu);
    outcome = std::move(offset);
    cv.notify_one();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return outcome.has_value(); });
  return *std::move(outcome);
}

absl::StatusOr<std::unique_ptr<ShardLogReader>> ShardLogReader::Open(
    const ShardLogOptions& options, const std::vector<std::pair<int32_t, int64_t>>& from) {
  auto reader = std::make_unique<KafkaShardLogReader>(options.topic);
  if (absl::Status started = reader->Start(options, from); !started.ok()) return started;
  return reader;
}

}  // namespace feed::bridge

#include "bridge/shard_group.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fmt/format.h"
#include "kafka_handles.h"
#include "kafka_security.h"
#include "logging.h"

namespace feed::bridge {
namespace {

using internal::ConfHandle;
using internal::ProducerHandle;

std::vector<int32_t> Shards(const rd_kafka_topic_partition_list_t* partitions) {
  std::vector<int32_t> shards;
  for (int i = 0; i < partitions->cnt; ++i) shards.push_back(partitions->elems[i].partition);
  return shards;
}

class KafkaShardGroupMember final : public ShardGroupMember {
 public:
  explicit KafkaShardGroupMember(OnChange on_change) : on_change_(std::move(on_change)) {}

  absl::Status Start(const ShardLogOptions& log, const ShardGroupOptions& group) {
    if (group.instance_id.empty()) {
      return absl::InvalidArgumentError("shard group: instance_id (the node id) is empty");
    }
    auto password = internal::SaslPassword::Open(
        log.security, log.kafka_properties, std::chrono::milliseconds(log.credentials_check_ms),
        "shard group");
    if (!password.ok()) return password.status();
    password_ = std::move(*password);
    ConfHandle conf(rd_kafka_conf_new());
    std::vector<std::pair<std::string, std::string>> props = {
        {"bootstrap.servers", log.brokers},
        {"client.id", log.client_id + "-members"},
        {"group.id", group.group_id},
        {"group.instance.id", group.instance_id},
        {"partition.assignment.strategy", "cooperative-sticky"},
        {"session.timeout.ms", fmt::format("{}", group.session_timeout_ms)},
        {"heartbeat.interval.ms",
         fmt::format("{}", std::max<int64_t>(100, group.session_timeout_ms / 6))},
        {"enable.auto.commit", "false"},
        {"log.connection.close", "false"},
    };
    if (absl::Status s = internal::ConfigureClient(conf.get(), std::move(props), log.security,
                                                   log.kafka_properties, *password_, "shard group");
        !s.ok()) {
      return s;
    }
    char err[512];
    rd_kafka_conf_set_rebalance_cb(conf.get(), &OnRebalance);
    rd_kafka_conf_set_opaque(conf.get(), this);
    rk_.reset(rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), err, sizeof err));
    if (rk_ == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("shard group: cannot create a consumer: {}", err));
    }
    (void)conf.release();
    rd_kafka_poll_set_consumer(rk_.get());
    internal::PartitionListHandle topics(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(topics.get(), log.topic.c_str(), RD_KAFKA_PARTITION_UA);
    if (rd_kafka_resp_err_t e = rd_kafka_subscribe(rk_.get(), topics.get());
        e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return absl::InternalError(
          fmt::format("shard group: subscribe to {}: {}", log.topic, rd_kafka_err2str(e)));
    }
    poller_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "feed-members");
      while (!stop_.load(std::memory_order_acquire)) {
        internal::MessageHandle msg(rd_kafka_consumer_poll(rk_.get(), 100));
        if (msg != nullptr && msg->err != RD_KAFKA_RESP_ERR_NO_ERROR &&
            msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
          internal::BridgeLogger()->warn("shard group: {}", rd_kafka_message_errstr(msg.get()));
        }
        password_->Refresh(rk_.get());
      }
    });
    return absl::OkStatus();
  }

  ~KafkaShardGroupMember() override {
    if (rk_ == nullptr) return;
    stop_.store(true, std::memory_order_release);
    if (poller_.joinable()) poller_.join();
    closing_.store(true, std::memory_order_release);
    rd_kafka_consumer_close(rk_.get());
  }

 private:
  static void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* partitions, void* opaque) {
    auto* self = static_cast<KafkaShardGroupMember*>(opaque);
    ShardAssignment change;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      if (rd_kafka_error_t* e = rd_kafka_incremental_assign(rk, partitions)) {
        internal::BridgeLogger()->error("shard group: assign: {}", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return;
      }
      // Membership only: the shard log's readers read the records.
      rd_kafka_pause_partitions(rk, partitions);
      change.assigned = Shards(partitions);
    } else {
      change.revoked = Shards(partitions);
      change.lost = rd_kafka_assignment_lost(rk) != 0;
      if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk, partitions)) {
        internal::BridgeLogger()->error("shard group: unassign: {}", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
      }
    }
    if (change.assigned.empty() && change.revoked.empty()) return;
    // A close (static membership) keeps the shards in the group; the node stops its cores
    // itself.
    if (self->closing_.load(std::memory_order_acquire)) return;
    self->on_change_(change);
  }

  const OnChange on_change_;
  std::unique_ptr<internal::SaslPassword> password_;  // the poller's
  ProducerHandle rk_;
  std::atomic<bool> stop_{false}, closing_{false};
  std::thread poller_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShardGroupMember>> ShardGroupMember::Start(
    const ShardLogOptions& log, const ShardGroupOptions& group, OnChange on_change) {
  auto member = std::make_unique<KafkaShardGroupMember>(std::move(on_change));
  if (absl::Status started = member->Start(log, group); !started.ok()) return started;
  return member;
}

}  // namespace feed::bridge

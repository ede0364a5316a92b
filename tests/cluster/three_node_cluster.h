// Three feed-server processes in cluster mode on this machine, each with its own port, data
// directory and log, over the local broker (compose/kafka.sh): the fixture of the cluster
// tests that run processes (faults, streams). A failing test prints each node's last lines.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/shard_hash.h"
#include "gtest/gtest.h"
#include "kafka_test_util.h"
#include "node_process.h"
#include "routing_client.h"
#include "util/free_port.h"

namespace feed::cluster_test {

using namespace std::chrono_literals;

constexpr int kNodes = 3;
constexpr int kShards = 6;
constexpr int kSkus = 24;
constexpr int64_t kStock = 1'000'000;
constexpr int kSessionTimeoutMs = 6000;

inline std::string Sku(int i) { return "SKU-" + std::to_string(i); }

class ThreeNodeCluster : public ::testing::Test {
 protected:
  using Clock = std::chrono::steady_clock;

  // CLUSTER_BROKERS=3 (the long mode): the three brokers of compose/kafka-cluster.sh, the
  // shard log and the public topics with replication factor 3 and min.insync.replicas 2.
  static bool ThreeBrokers() {
    const char* v = std::getenv("CLUSTER_BROKERS");
    return v != nullptr && std::string(v) == "3";
  }
  static int KafkaClusterScript(const std::string& command) {
    const std::string cmd =
        std::string(FEED_REPO_DIR) + "/compose/kafka-cluster.sh " + command + " >/dev/null";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  void SetUp() override {
    if (ThreeBrokers()) {
      ASSERT_EQ(KafkaClusterScript("start"), 0) << "compose/kafka-cluster.sh could not start";
      const char* port = std::getenv("KAFKA_CLUSTER_PORT");
      const int base = port != nullptr && *port != '\0' ? std::atoi(port) : 29092;
      brokers_.clear();
      for (int i = 0; i < 3; ++i) {
        brokers_ += (i > 0 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(base + 2 * i);
      }
    } else {
      ASSERT_TRUE(bridge::test::EnsureBroker()) << "compose/kafka.sh could not start the broker";
      brokers_ = bridge::test::Brokers();
    }
    const std::string replication = ThreeBrokers() ? "3" : "1";
    const std::string min_insync = ThreeBrokers() ? "2" : "1";
    topic_ = bridge::test::UniqueName("shard-log");
    stock_topic_ = bridge::test::UniqueName("stock");
    group_ = bridge::test::UniqueName("feed-cluster");
    root_ = std::filesystem::temp_directory_path() / bridge::test::UniqueName("feed-cluster");
    std::filesystem::create_directories(root_);
    std::vector<std::string> addresses;
    for (int i = 0; i < kNodes; ++i) {
      const int port = test_util::FreeLoopbackPort();
      ASSERT_NE(port, 0) << "no free loopback port";
      nodes_.push_back(
          std::make_unique<NodeProcess>(FEED_SERVER_PATH, "node-" + std::to_string(i), port,
                                        (root_ / ("node-" + std::to_string(i))).string(),
                                        std::vector<std::string>{"--cluster-shards",
                                                                 std::to_string(kShards),
                                                                 "--kafka-brokers",
                                                                 brokers_,
                                                                 "--cluster-topic",
                                                                 topic_,
                                                                 "--cluster-group",
                                                                 group_,
                                                                 "--cluster-session-timeout-ms",
                                                                 std::to_string(kSessionTimeoutMs),
                                                                 "--kafka-stock-topic",
                                                                 stock_topic_,
                                                                 "--kafka-order-status-topic",
                                                                 stock_topic_ + "-status",
                                                                 "--kafka-receipt-topic",
                                                                 stock_topic_ + "-receipts",
                                                                 "--cluster-replication-factor",
                                                                 replication,
                                                                 "--cluster-min-insync-replicas",
                                                                 min_insync,
                                                                 "--kafka-replication-factor",
                                                                 replication}));
      addresses.push_back(nodes_.back()->address());
    }
    for (auto& node : nodes_) ASSERT_TRUE(node->Start());
    client_ = std::make_unique<RoutingClient>(addresses);
    addresses_ = addresses;
    ASSERT_TRUE(WaitForAllShardsServed(60s)) << "the cluster did not form";
  }

  void TearDown() override {
    if (HasFailure()) {
      for (auto& node : nodes_)
        std::cerr << "logs of " << node->node_id() << ": " << node->log_file() << ", last lines:\n"
                  << node->LogTail(25);
    }
    for (auto& node : nodes_) node->Kill();
    bridge::test::DeleteTopics(
        brokers_, {topic_, stock_topic_, stock_topic_ + "-status", stock_topic_ + "-receipts"});
    if (!HasFailure()) std::filesystem::remove_all(root_);
  }

  // Every shard claimed, every node running serves one, and each owner answers for its shard.
  bool WaitForAllShardsServed(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      std::this_thread::sleep_for(200ms);
      size_t running = 0;
      for (auto& node : nodes_) {
        if (node->Exited()) {
          ADD_FAILURE() << node->node_id() << " exited by itself";
          return false;
        }
        running += node->running() ? 1 : 0;
      }
      if (!client_->RefreshMap()) continue;
      const inv::GetShardMapResponse map = client_->map();
      std::set<std::string> owners;
      bool all = map.shards_size() == kShards;
      for (const auto& s : map.shards()) {
        all &= s.epoch() > 0;
        owners.insert(s.node_id());
      }
      if (all && owners.size() == running && EveryOwnerAnswers()) return true;
    }
    return false;
  }

  // GetStock of one SKU of each shard answered by the node the map names.
  bool EveryOwnerAnswers() {
    std::set<uint32_t> asked;
    for (int i = 0; i < kSkus * 4 && asked.size() < kShards; ++i) {
      const uint32_t shard = cluster::ShardOf(Sku(i), kShards);
      if (!asked.insert(shard).second) continue;
      grpc::Status s = client_->OnShard(
          shard,
          [&](inv::InventoryService::Stub& stub, grpc::ClientContext& ctx) {
            inv::GetStockRequest r;
            r.add_sku(Sku(i));
            inv::GetStockResponse out;
            return stub.GetStock(&ctx, r, &out);
          },
          0ms);
      if (!s.ok()) return false;
    }
    return true;
  }

  uint32_t ShardOwnedBy(int node) {
    const inv::GetShardMapResponse map = client_->map();
    for (const auto& s : map.shards()) {
      if (s.node_id() == nodes_[node]->node_id()) return s.shard();
    }
    return kShards;
  }
  int OwnerOf(uint32_t shard) {
    const std::string id = client_->map().shards(static_cast<int>(shard)).node_id();
    for (int i = 0; i < kNodes; ++i) {
      if (nodes_[i]->node_id() == id) return i;
    }
    return -1;
  }
  std::string SkuOn(uint32_t shard) {
    for (int i = 0;; ++i) {
      if (cluster::ShardOf(Sku(i), kShards) == shard) return Sku(i);
    }
  }

  void Stock() {
    for (int i = 0; i < kSkus; ++i) {
      grpc::Status s = client_->OnShard(
          cluster::ShardOf(Sku(i), kShards),
          [&](inv::InventoryService::Stub& stub, grpc::ClientContext& ctx) {
            inv::AdjustStockRequest r;
            r.set_sku(Sku(i));
            r.set_mode(inv::ADJUST_MODE_SET);
            r.set_quantity(kStock);
            r.set_reason("stock");
            r.set_idempotency_key("stock-" + Sku(i));
            inv::AdjustStockResponse out;
            return stub.AdjustStock(&ctx, r, &out);
          },
          30s);
      ASSERT_TRUE(s.ok()) << Sku(i) << ": " << s.error_message();
    }
  }

  std::vector<std::unique_ptr<NodeProcess>> nodes_;
  std::vector<std::string> addresses_;
  std::unique_ptr<RoutingClient> client_;
  std::string brokers_;
  std::string topic_, stock_topic_, group_;
  std::filesystem::path root_;
};

}  // namespace feed::cluster_test

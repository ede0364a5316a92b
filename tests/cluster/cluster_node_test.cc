// Cluster nodes against the real broker: three ClusterNodes in this process share a shard log
// of 4 shards through one consumer group. Every shard gets exactly one serving node; a node
// that goes silent (closed without leaving the group, as a crash leaves it) has its shards
// claimed by the others after the session timeout, with every reservation they acknowledged;
// the map every node reads names the same owners; every standby copy is checkpointed, so the
// takeover recovers from its tables.
#include "cluster/cluster_node.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bridge/shard_log.h"
#include "cluster/shard_hash.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "kafka_test_util.h"

namespace feed::cluster {
namespace {

namespace inv = ::inventory::v1;
using namespace std::chrono_literals;

constexpr int kShards = 4;
constexpr int kNodes = 3;

class ClusterNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(bridge::test::EnsureBroker()) << "compose/kafka.sh could not start the broker";
    log_.brokers = bridge::test::Brokers();
    log_.topic = bridge::test::UniqueName("shard-log");
    log_.shards = kShards;
    ASSERT_TRUE(bridge::EnsureShardLogTopic(log_, 20000).ok());
    group_ = bridge::test::UniqueName("feed-cluster");
    root_ = std::filesystem::temp_directory_path() / bridge::test::UniqueName("feed-nodes");
  }
  void TearDown() override {
    for (auto& node : nodes_) node.reset();
    bridge::test::DeleteTopics(log_.brokers, {log_.topic});
    std::filesystem::remove_all(root_);
  }

  std::unique_ptr<ClusterNode> StartNode(int i) {
    ClusterOptions options;
    options.self = {fmt::format("node-{}", i), fmt::format("127.0.0.1:{}", 50100 + i)};
    options.log = log_;
    options.group_id = group_;
    options.session_timeout_ms = 6000;
    options.data_dir = (root_ / options.self.node_id).string();
    options.store.block_cache_bytes = 4u << 20;
    options.store.memtable_budget_bytes = 8u << 20;
    options.core.sweep_interval_ms = 0;
    options.core.checkpoint_interval_ms = 200;  // the standbys' checkpoints too
    auto node = ClusterNode::Start(options, clock_);
    EXPECT_TRUE(node.ok()) << node.status();
    return node.ok() ? std::move(*node) : nullptr;
  }

  // Which node serves each shard, once every shard has exactly one and every running node
  // serves some (the group has balanced them), or the timeout passes.
  std::map<uint32_t, int> WaitForOwners(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::map<uint32_t, int> owners;
      bool twice = false, idle = false;
      for (int i = 0; i < kNodes; ++i) {
        if (!nodes_[i]) continue;
        const std::vector<uint32_t> owned = nodes_[i]->OwnedShards();
        idle |= owned.empty();
        for (uint32_t s : owned) twice |= !owners.emplace(s, i).second;
      }
      EXPECT_FALSE(twice) << "a shard served by two nodes at once";
      if ((owners.size() == kShards && !idle) || std::chrono::steady_clock::now() > deadline) {
        return owners;
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  absl::StatusOr<inv::ReserveResponse> Reserve(const std::string& sku, int64_t quantity,
                                               const std::map<uint32_t, int>& owners) {
    const uint32_t shard = ShardOf(sku, kShards);
    auto core = nodes_[owners.at(shard)]->Core(shard);
    if (core == nullptr) return absl::UnavailableError("not served");
    inv::ReserveRequest r;
    auto* line = r.add_lines();
    line->set_sku(sku);
    line->set_quantity(quantity);
    return core::CallSync(*core, &core::InventoryCore::Reserve, std::move(r));
  }

  core::SystemClock clock_;
  bridge::ShardLogOptions log_;
  std::string group_;
  std::filesystem::path root_;
  std::unique_ptr<ClusterNode> nodes_[kNodes];
};

TEST_F(ClusterNodeTest, EveryShardHasOneOwnerAndASilentNodesShardsMoveWithTheirReservations) {
  for (int i = 0; i < kNodes; ++i) {
    nodes_[i] = StartNode(i);
    ASSERT_NE(nodes_[i], nullptr);
  }
  std::map<uint32_t, int> owners = WaitForOwners(60s);
  ASSERT_EQ(owners.size(), static_cast<size_t>(kShards));
  std::set<int> serving;
  for (const auto& [shard, owner] : owners) serving.insert(owner);
  ASSERT_EQ(serving.size(), static_cast<size_t>(kNodes)) << "the group did not spread the shards";

  // Stock on every shard, then reservations through each SKU's owner.
  std::vector<std::string> skus;
  std::set<uint32_t> covered;
  for (int i = 0; covered.size() < kShards; ++i) {
    skus.push_back(fmt::format("SKU-{}", i));
    covered.insert(ShardOf(skus.back(), kShards));
  }
  for (const std::string& sku : skus) {
    const uint32_t shard = ShardOf(sku, kShards);
    inv::AdjustStockRequest r;
    r.set_sku(sku);
    r.set_mode(inv::ADJUST_MODE_DELTA);
    r.set_quantity(100);
    r.set_reason("restock");
    ASSERT_TRUE(core::CallSync(*nodes_[owners[shard]]->Core(shard),
                               &core::InventoryCore::AdjustStock, std::move(r))
                    .ok());
  }
  std::map<std::string, std::string> acknowledged;  // reservation id -> sku
  for (int round = 0; round < 5; ++round) {
    for (const std::string& sku : skus) {
      auto r = Reserve(sku, 3, owners);
      ASSERT_TRUE(r.ok()) << r.status();
      acknowledged[r->reservation().reservation_id()] = sku;
    }
  }

  // Every node reads the same owners from the log.
  for (int i = 0; i < kNodes; ++i) {
    ASSERT_TRUE(bridge::test::WaitFor(
        [&] {
          const auto map = nodes_[i]->ShardMap();
          for (const auto& [shard, owner] : owners) {
            if (map[shard].node_id != fmt::format("node-{}", owner)) return false;
          }
          return true;
        },
        10s))
        << "node-" << i << " reads another map";
  }

  // Every standby copy folds the journal into its tables (core/journal_checkpoint.h): its
  // checkpoint reaches the owner's last sequence, so a takeover replays nothing of it.
  for (int i = 0; i < kNodes; ++i) {
    for (const auto& [shard, owner] : owners) {
      if (owner == i) continue;
      const uint64_t last = nodes_[owner]->Core(shard)->stats().last_sequence;
      ASSERT_TRUE(bridge::test::WaitFor(
          [&] {
            auto cp = storage::ReadMetaSequence(nodes_[i]->Store(shard),
                                                storage::meta_keys::kCheckpointSequence);
            return cp.ok() && cp->value_or(0) == last;
          },
          10s))
          << "node-" << i << "'s standby copy of shard " << shard << " is not checkpointed";
    }
  }

  // The node that serves the most shards goes silent: its shards move after the session
  // timeout, to nodes that had them as standbys.
  std::map<int, int> served;
  for (const auto& [shard, owner] : owners) ++served[owner];
  int victim = owners.begin()->second;
  for (const auto& [node, count] : served) {
    if (count > served[victim]) victim = node;
  }
  const auto silenced = std::chrono::steady_clock::now();
  nodes_[victim].reset();
  owners = WaitForOwners(60s);
  const auto failover = std::chrono::steady_clock::now() - silenced;
  ASSERT_EQ(owners.size(), static_cast<size_t>(kShards));
  for (const auto& [shard, owner] : owners) EXPECT_NE(owner, victim) << "shard " << shard;
  std::cerr << "failover of " << served[victim] << " shards took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(failover).count() << " ms\n";

  for (const auto& [id, sku] : acknowledged) {
    const uint32_t shard = ShardOf(sku, kShards);
    auto hold = nodes_[owners[shard]]->Core(shard)->GetReservation(id);
    ASSERT_TRUE(hold.ok()) << id << " on shard " << shard << ": " << hold.status();
    EXPECT_EQ(hold->lines(0).sku(), sku);
  }
  for (const std::string& sku : skus) {
    auto more = Reserve(sku, 1, owners);
    ASSERT_TRUE(more.ok()) << sku << ": " << more.status();
    inv::GetStockRequest get;
    get.add_sku(sku);
    const uint32_t shard = ShardOf(sku, kShards);
    auto level = nodes_[owners[shard]]->Core(shard)->GetStock(get);
    ASSERT_TRUE(level.ok());
    EXPECT_EQ(level->levels(0).reserved(), 16) << sku;
    EXPECT_EQ(level->levels(0).available(), 84) << sku;
  }
}

}  // namespace
}  // namespace feed::cluster

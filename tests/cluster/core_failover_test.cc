// Cluster mode's failover at the core level, against the real broker and real RocksDB stores:
// an owner's core commits through the shard log (the acknowledgement point), a standby keeps
// a store from the log, takes the shard over and opens a core on that store with every
// acknowledged reservation; the old owner, a zombie, gets no write accepted and, restarted,
// catches up as a standby.
#include <filesystem>
#include <string>
#include <vector>

#include "bridge/shard_log.h"
#include "cluster/shard_replica.h"
#include "cluster/shard_store.h"
#include "core/clock.h"
#include "core/inventory_core.h"
#include "gtest/gtest.h"
#include "kafka_test_util.h"
#include "storage/rocksdb_store.h"

namespace feed::cluster {
namespace {

namespace inv = ::inventory::v1;
using core::CallSync;
using core::InventoryCore;

constexpr int64_t kTimeoutMs = 20000;
constexpr int32_t kShard = 1;

// One node's share of a shard: its store, its replica of the log, and its core once it owns
// the shard.
struct Node {
  std::string id;
  std::filesystem::path dir;
  std::unique_ptr<storage::Store> store;
  std::unique_ptr<ShardReplica> replica;
  std::unique_ptr<InventoryCore> core;

  ~Node() {
    if (core) core->Shutdown();
  }
};

class CoreFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(bridge::test::EnsureBroker()) << "compose/kafka.sh could not start the broker";
    options_.brokers = bridge::test::Brokers();
    options_.topic = bridge::test::UniqueName("shard-log");
    options_.shards = 2;
    ASSERT_TRUE(bridge::EnsureShardLogTopic(options_, kTimeoutMs).ok());
    auto writer = bridge::ShardLogWriter::Open(options_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = std::move(*writer);
    root_ = std::filesystem::temp_directory_path() / bridge::test::UniqueName("feed-cluster");
    std::filesystem::create_directories(root_);
  }
  void TearDown() override {
    nodes_.clear();
    writer_.reset();
    bridge::test::DeleteTopics(options_.brokers, {options_.topic});
    std::filesystem::remove_all(root_);
  }

  // Opens (or reopens) node `id`'s store and its replica, reading the log after the store.
  Node& StartNode(const std::string& id) {
    auto node = std::make_unique<Node>();
    node->id = id;
    node->dir = root_ / id;
    storage::RocksDbOptions rocks;
    rocks.path = node->dir.string();
    auto store = storage::OpenRocksDbStore(rocks);
    EXPECT_TRUE(store.ok()) << store.status();
    node->store = std::move(*store);
    auto from = LoadShardLogPosition(*node->store);
    EXPECT_TRUE(from.ok()) << from.status();
    auto reader = bridge::ShardLogReader::Open(options_, {{kShard, from->next_offset}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    storage::Store* target = node->store.get();
    node->replica = std::make_unique<ShardReplica>(
        kShard, NodeIdentity{id, id + ":50051"}, *writer_, std::move(*reader), from->next_offset,
        from->owner,
        [target](std::string_view entry, int64_t offset, bool own) {
          // The owner's core stores its own batches with their offsets.
          return own ? absl::OkStatus() : StoreLoggedEntry(*target, entry, offset);
        },
        [target](const ShardOwner& owner) { return StoreClaim(*target, owner); });
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }

  // Claims the shard for `node` and opens its core over the log.
  void TakeOver(Node& node) {
    ASSERT_TRUE(node.replica->Claim(clock_.NowMillis(), kTimeoutMs).ok());
    core::CoreOptions options;
    options.replicated_log = std::make_shared<ShardLogReplication>(
        *node.replica, node.replica->ledger().owner(), kTimeoutMs);
    auto core = InventoryCore::Open(*node.store, clock_, options);
    ASSERT_TRUE(core.ok()) << core.status();
    node.core = std::move(*core);
  }

  static absl::StatusOr<inv::ReserveResponse> Reserve(InventoryCore& core, const std::string& sku,
                                                      int64_t quantity) {
    inv::ReserveRequest r;
    auto* line = r.add_lines();
    line->set_sku(sku);
    line->set_quantity(quantity);
    return CallSync(core, &InventoryCore::Reserve, std::move(r));
  }
  static absl::StatusOr<inv::AdjustStockResponse> Adjust(InventoryCore& core,
                                                         const std::string& sku, int64_t qty) {
    inv::AdjustStockRequest r;
    r.set_sku(sku);
    r.set_mode(inv::ADJUST_MODE_DELTA);
    r.set_quantity(qty);
    r.set_reason("restock");
    return CallSync(core, &InventoryCore::AdjustStock, std::move(r));
  }
  static inv::StockLevel Level(const InventoryCore& core, const std::string& sku) {
    inv::GetStockRequest r;
    r.add_sku(sku);
    auto got = core.GetStock(r);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() && got->levels_size() == 1 ? got->levels(0) : inv::StockLevel();
  }

  core::SystemClock clock_;
  bridge::ShardLogOptions options_;
  std::unique_ptr<bridge::ShardLogWriter> writer_;
  std::filesystem::path root_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(CoreFailoverTest, TheNewOwnerHasEveryAcknowledgedReservationAndTheZombieNone) {
  Node& a = StartNode("node-a");
  Node& b = StartNode("node-b");
  TakeOver(a);
  ASSERT_TRUE(a.core);
  ASSERT_TRUE(Adjust(*a.core, "sku-1", 100).ok());
  std::vector<std::string> acknowledged;
  for (int i = 0; i < 20; ++i) {
    auto r = Reserve(*a.core, "sku-1", 2);
    ASSERT_TRUE(r.ok()) << r.status();
    acknowledged.push_back(r->reservation().reservation_id());
  }
  // The standby follows (it reads what the log holds now), then a stops answering: b takes
  // over without a's help.
  ASSERT_TRUE(b.replica->CatchUp(kTimeoutMs).ok());
  TakeOver(b);
  ASSERT_TRUE(b.core);
  EXPECT_EQ(b.replica->ledger().owner().epoch, 2u);
  const inv::StockLevel level = Level(*b.core, "sku-1");
  EXPECT_EQ(level.on_hand(), 100);
  EXPECT_EQ(level.reserved(), 40);
  EXPECT_EQ(level.available(), 60);
  for (const std::string& id : acknowledged) {
    auto hold = b.core->GetReservation(id);
    ASSERT_TRUE(hold.ok()) << id << ": " << hold.status();
    EXPECT_EQ(hold->lines(0).quantity(), 2);
  }
  auto next = Reserve(*b.core, "sku-1", 5);
  ASSERT_TRUE(next.ok()) << next.status();

  // a resumes as a zombie: its write is fenced, never answered OK, and its core stops.
  auto zombie = Reserve(*a.core, "sku-1", 50);
  ASSERT_FALSE(zombie.ok());
  EXPECT_EQ(zombie.status().code(), absl::StatusCode::kUnavailable) << zombie.status();
  EXPECT_NE(zombie.status().message().find("fenced"), std::string::npos) << zombie.status();
  EXPECT_EQ(a.core->health().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Level(*b.core, "sku-1").reserved(), 45);

  // a restarts and catches up as a standby: its store then opens into b's state, without the
  // zombie's reservation.
  a.core->Shutdown();
  a.core.reset();
  a.replica.reset();
  a.store.reset();
  Node& a2 = StartNode("node-a");
  ASSERT_TRUE(a2.replica->CatchUp(kTimeoutMs).ok());
  EXPECT_EQ(a2.replica->stats().fenced, 1u);
  EXPECT_EQ(a2.replica->ledger().owner().node_id, "node-b");

  // b goes on; a restarts once more, now past b's claim in the log: it resumes with b as the
  // owner (stored with its offset) and applies b's batch instead of fencing it.
  auto after_restart = Reserve(*b.core, "sku-1", 1);
  ASSERT_TRUE(after_restart.ok()) << after_restart.status();
  a2.replica.reset();
  a2.store.reset();
  Node& a3 = StartNode("node-a");
  EXPECT_EQ(a3.replica->ledger().owner().node_id, "node-b");
  ASSERT_TRUE(a3.replica->CatchUp(kTimeoutMs).ok());
  EXPECT_EQ(a3.replica->stats().applied, 1u);
  // The zombie's record is after the store's offset (only applied records move it): judged
  // again, fenced again.
  EXPECT_EQ(a3.replica->stats().fenced, 1u);

  b.core->Shutdown();
  core::CoreOptions standalone;
  auto reopened = InventoryCore::Open(*a3.store, clock_, standalone);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  const inv::StockLevel after = Level(**reopened, "sku-1");
  EXPECT_EQ(after.reserved(), 46);
  EXPECT_EQ(after.available(), 54);
  for (const auto* id :
       {&next->reservation().reservation_id(), &after_restart->reservation().reservation_id()}) {
    EXPECT_TRUE((*reopened)->GetReservation(*id).ok()) << *id;
  }
  (*reopened)->Shutdown();
}

}  // namespace
}  // namespace feed::cluster

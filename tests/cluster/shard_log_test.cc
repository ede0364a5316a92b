// Cluster mode's shard log against the real broker (compose/kafka.sh): claims, the
// acknowledgement point and fencing over real Kafka partitions, with ShardReplicas standing in
// for nodes. Each test uses a fresh topic.
#include "bridge/shard_log.h"

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cluster/shard_replica.h"
#include "gtest/gtest.h"
#include "kafka_test_util.h"

namespace feed::cluster {
namespace {

constexpr int64_t kTimeoutMs = 20000;

class ShardLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(bridge::test::EnsureBroker()) << "compose/kafka.sh could not start the broker";
    options_.brokers = bridge::test::Brokers();
    options_.topic = bridge::test::UniqueName("shard-log");
    options_.shards = 3;
    ASSERT_TRUE(bridge::EnsureShardLogTopic(options_, kTimeoutMs).ok());
    auto writer = bridge::ShardLogWriter::Open(options_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = std::move(*writer);
  }
  void TearDown() override {
    writer_.reset();
    bridge::test::DeleteTopics(options_.brokers, {options_.topic});
  }

  // A node's replica of `shard`, read from the beginning; its applied entries in `applied`.
  struct Node {
    std::vector<std::string> applied;
    std::unique_ptr<ShardReplica> replica;
  };
  std::unique_ptr<Node> MakeNode(const std::string& id, int32_t shard) {
    auto node = std::make_unique<Node>();
    auto reader = bridge::ShardLogReader::Open(options_, {{shard, 0}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return nullptr;
    node->replica = std::make_unique<ShardReplica>(
        shard, NodeIdentity{id, id + ":50051"}, *writer_, std::move(*reader), 0, ShardOwner{},
        [n = node.get()](std::string_view entry, int64_t, bool) {
          n->applied.emplace_back(entry);
          return absl::OkStatus();
        });
    return node;
  }

  bridge::ShardLogOptions options_;
  std::unique_ptr<bridge::ShardLogWriter> writer_;
};

TEST_F(ShardLogTest, TheTopicHasOnePartitionPerShardAndAnotherCountIsRefused) {
  // Already there (SetUp): accepted again with the same count.
  EXPECT_TRUE(bridge::EnsureShardLogTopic(options_, kTimeoutMs).ok());
  bridge::ShardLogOptions other = options_;
  other.shards = 4;
  const absl::Status refused = bridge::EnsureShardLogTopic(other, kTimeoutMs);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("has 3 partitions but the cluster has 4 shards"),
            std::string::npos)
      << refused;
}

TEST_F(ShardLogTest, NobodyAppendsBeforeClaimingAndAClaimMakesTheOwner) {
  auto a = MakeNode("node-a", 1);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->replica->Append("too early", kTimeoutMs).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(a->replica->Claim(1000, kTimeoutMs).ok());
  EXPECT_TRUE(a->replica->owned());
  EXPECT_EQ(a->replica->ledger().owner().epoch, 1u);
  EXPECT_EQ(a->replica->ledger().owner().address, "node-a:50051");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a->replica->Append("a-" + std::to_string(i), kTimeoutMs).ok());
  }
  EXPECT_EQ(a->applied, (std::vector<std::string>{"a-0", "a-1", "a-2"}));
  // Nothing went to the other shards' partitions.
  auto other = bridge::ShardLogReader::Open(options_, {{0, 0}, {2, 0}});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*(*other)->EndOffset(0, kTimeoutMs), 0);
  EXPECT_EQ(*(*other)->EndOffset(2, kTimeoutMs), 0);
  EXPECT_EQ(*(*other)->EndOffset(1, kTimeoutMs), 4);  // the claim and three batches
}

TEST_F(ShardLogTest, ANewOwnerHasEveryAcknowledgedBatchAndTheZombieIsFenced) {
  auto a = MakeNode("node-a", 1);
  auto b = MakeNode("node-b", 1);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->replica->Claim(1000, kTimeoutMs).ok());
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(a->replica->Append("a-" + std::to_string(i), kTimeoutMs).ok());

  // b takes over (a is paused, say): it has applied all of a's acknowledged batches first.
  ASSERT_TRUE(b->replica->Claim(2000, kTimeoutMs).ok());
  EXPECT_EQ(b->replica->ledger().owner().epoch, 2u);
  EXPECT_EQ(b->applied, a->applied);

  // a resumes and writes on under its old claim: not acknowledged, and it learns it lost.
  const absl::Status zombie = a->replica->Append("zombie", kTimeoutMs);
  EXPECT_EQ(zombie.code(), absl::StatusCode::kAborted) << zombie;
  EXPECT_NE(zombie.message().find("node-b claimed the shard at epoch 2"), std::string::npos)
      << zombie;
  EXPECT_FALSE(a->replica->owned());
  EXPECT_EQ(a->replica->Append("again", kTimeoutMs).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(b->replica->Append("b-0", kTimeoutMs).ok());

  // Every reader, a late one included, applies the same batches and never the zombie's.
  auto c = MakeNode("node-c", 1);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->replica->CatchUp(kTimeoutMs).ok());
  ASSERT_TRUE(a->replica->CatchUp(kTimeoutMs).ok());
  const std::vector<std::string> expected = {"a-0", "a-1", "a-2", "a-3", "a-4", "b-0"};
  EXPECT_EQ(c->applied, expected);
  EXPECT_EQ(a->applied, expected);
  EXPECT_EQ(b->applied, expected);
  EXPECT_EQ(c->replica->stats().fenced, 1u);
  EXPECT_EQ(c->replica->stats().claims, 2u);
  EXPECT_EQ(c->replica->ledger().owner().node_id, "node-b");
}

TEST_F(ShardLogTest, TwoNodesClaimingAtOnceEndWithOneOwnerBothAgreeOn) {
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto a = MakeNode("node-a", 2);
    auto b = MakeNode("node-b", 2);
    ASSERT_TRUE(a && b);
    auto claim_a = std::async(std::launch::async, [&] { return a->replica->Claim(1, kTimeoutMs); });
    auto claim_b = std::async(std::launch::async, [&] { return b->replica->Claim(1, kTimeoutMs); });
    const absl::Status ra = claim_a.get(), rb = claim_b.get();
    // Claims from one view carry one epoch and the first in the log wins (ABORTED for the
    // other); a claim made after reading the other's is a takeover and wins too.
    EXPECT_TRUE(ra.ok() || rb.ok()) << ra << " / " << rb;
    EXPECT_TRUE(ra.ok() || ra.code() == absl::StatusCode::kAborted) << ra;
    EXPECT_TRUE(rb.ok() || rb.code() == absl::StatusCode::kAborted) << rb;
    ASSERT_TRUE(a->replica->CatchUp(kTimeoutMs).ok());
    ASSERT_TRUE(b->replica->CatchUp(kTimeoutMs).ok());
    EXPECT_EQ(a->replica->ledger().owner().node_id, b->replica->ledger().owner().node_id);
    EXPECT_EQ(a->replica->ledger().owner().epoch, b->replica->ledger().owner().epoch);
    EXPECT_NE(a->replica->owned(), b->replica->owned());
    // The loser of the race, or the earlier owner, is refused.
    ShardReplica& loser = a->replica->owned() ? *b->replica : *a->replica;
    EXPECT_EQ(loser.Append("late", kTimeoutMs).code(), absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace feed::cluster

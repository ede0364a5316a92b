// Unit tests of cluster mode's rules (feed-server/cluster): the shard hash, and the ledger's
// apply rule on logs written by owners, racing claimants and zombies. The log is a vector
// here; the bridge's ShardLog tests run the same rule over a real Kafka partition.
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cluster/shard_hash.h"
#include "cluster/shard_ledger.h"
#include "gtest/gtest.h"

namespace feed::cluster {
namespace {

using internal::v1::ShardLogRecord;

TEST(ShardHashTest, IsStandardFnv1aSoOtherLanguagesAgree) {
  // Reference values from FNV's definition (the same as Go's hash/fnv.New64a).
  EXPECT_EQ(Fnv1a64Of(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64Of("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64Of("sku-1"), 0x95ea9e427819cf8cULL);
  EXPECT_EQ(ShardOf("sku-1", 12), 4u);
  EXPECT_EQ(ShardOf("SKU-000042", 12), 7u);
  // UTF-8 bytes, not characters.
  EXPECT_EQ(ShardOf("\xc3\x84\xc3\x96-1", 12), 9u);
  EXPECT_EQ(ShardOf("anything", 1), 0u);
}

TEST(ShardHashTest, SpreadsACatalogueEvenly) {
  constexpr uint32_t kShards = 12;
  constexpr int kSkus = 120'000;
  std::vector<int> per_shard(kShards);
  for (int i = 0; i < kSkus; ++i) ++per_shard[ShardOf("SKU-" + std::to_string(i), kShards)];
  for (uint32_t s = 0; s < kShards; ++s) {
    EXPECT_NEAR(per_shard[s], kSkus / kShards, kSkus / kShards / 20) << "shard " << s;
  }
}

ShardLogRecord Claim(uint64_t epoch, const std::string& node) {
  ShardLogRecord r;
  r.set_epoch(epoch);
  r.set_node_id(node);
  r.mutable_claim()->set_address(node + ":50051");
  return r;
}

ShardLogRecord Batch(uint64_t epoch, const std::string& node, const std::string& id) {
  ShardLogRecord r;
  r.set_epoch(epoch);
  r.set_node_id(node);
  r.set_journal_entry(id);
  return r;
}

TEST(ShardLedgerTest, NobodyWritesBeforeTheFirstClaim) {
  ShardLedger ledger;
  EXPECT_FALSE(ledger.owner().claimed());
  EXPECT_EQ(ledger.Apply(Batch(0, "a", "x"), 0), Verdict::kBatchFenced);
  EXPECT_EQ(ledger.Apply(Batch(1, "a", "x"), 1), Verdict::kBatchFenced);
  EXPECT_EQ(ledger.next_epoch(), 1u);
}

TEST(ShardLedgerTest, AClaimMakesItsNodeTheOwner) {
  ShardLedger ledger;
  ShardLogRecord claim = MakeClaim(ledger, "node-a", "10.0.0.1:50051", 1234);
  EXPECT_EQ(claim.epoch(), 1u);
  ASSERT_EQ(ledger.Apply(claim, 7), Verdict::kClaimAccepted);
  EXPECT_EQ(ledger.owner().epoch, 1u);
  EXPECT_EQ(ledger.owner().node_id, "node-a");
  EXPECT_EQ(ledger.owner().address, "10.0.0.1:50051");
  EXPECT_EQ(ledger.owner().claim_offset, 7);
  EXPECT_TRUE(ledger.OwnedBy("node-a"));
  EXPECT_FALSE(ledger.OwnedBy("node-b"));
  EXPECT_EQ(ledger.Apply(MakeBatch(ledger.owner(), "entry"), 8), Verdict::kBatchValid);
}

TEST(ShardLedgerTest, AZombiesBatchesAfterTheNewClaimAreFenced) {
  ShardLedger ledger;
  ASSERT_EQ(ledger.Apply(Claim(1, "a"), 0), Verdict::kClaimAccepted);
  EXPECT_EQ(ledger.Apply(Batch(1, "a", "before"), 1), Verdict::kBatchValid);
  ASSERT_EQ(ledger.Apply(Claim(2, "b"), 2), Verdict::kClaimAccepted);
  // a was paused and has not read the claim: it still writes under epoch 1.
  EXPECT_EQ(ledger.Apply(Batch(1, "a", "zombie"), 3), Verdict::kBatchFenced);
  EXPECT_EQ(ledger.Apply(Batch(2, "b", "new owner"), 4), Verdict::kBatchValid);
  // A record claiming b's epoch but written by a is fenced too.
  EXPECT_EQ(ledger.Apply(Batch(2, "a", "forged"), 5), Verdict::kBatchFenced);
}

TEST(ShardLedgerTest, OfTwoClaimantsOfOneEpochTheFirstInTheLogWins) {
  ShardLedger ledger;
  ASSERT_EQ(ledger.Apply(Claim(1, "a"), 0), Verdict::kClaimAccepted);
  ASSERT_EQ(ledger.Apply(Claim(2, "b"), 1), Verdict::kClaimAccepted);
  EXPECT_EQ(ledger.Apply(Claim(2, "c"), 2), Verdict::kClaimRejected);
  EXPECT_EQ(ledger.Apply(Claim(1, "c"), 3), Verdict::kClaimRejected);
  EXPECT_EQ(ledger.owner().node_id, "b");
  EXPECT_EQ(ledger.owner().claim_offset, 1);
  // c did not notice it lost and writes: fenced, although the epoch matches.
  EXPECT_EQ(ledger.Apply(Batch(2, "c", "loser"), 4), Verdict::kBatchFenced);
  EXPECT_EQ(ledger.Apply(Batch(2, "b", "winner"), 5), Verdict::kBatchValid);
}

TEST(ShardLedgerTest, RecordsWithoutABodyOrClaimsWithoutANodeChangeNothing) {
  ShardLedger ledger;
  ASSERT_EQ(ledger.Apply(Claim(1, "a"), 0), Verdict::kClaimAccepted);
  ShardLogRecord empty;
  empty.set_epoch(9);
  EXPECT_EQ(ledger.Apply(empty, 1), Verdict::kMalformed);
  EXPECT_EQ(ledger.Apply(Claim(5, ""), 2), Verdict::kClaimRejected);
  EXPECT_EQ(ledger.owner().epoch, 1u);
  EXPECT_STREQ(VerdictName(Verdict::kBatchFenced), "batch fenced");
}

// Nodes sharing one log, each reading it at its own pace, claiming when it believes the
// owner gone (possibly from a stale view), writing batches while it believes it owns the
// shard (a zombie does too), and acknowledging a batch only once it has read it back valid:
// the acknowledgement point of docs/CLUSTER.md. Random interleavings of these steps.
class Simulation {
 public:
  explicit Simulation(uint32_t seed) : rng_(seed) {}

  void Run(int steps) {
    for (int i = 0; i < steps; ++i) Step(nodes_[Pick(kNodes)]);
    for (Node& node : nodes_) {
      while (node.read < log_.size()) Read(node);
    }
  }

  // What every test checks after a run.
  void CheckInvariants() const {
    for (const Node& node : nodes_) {
      // Every reader applied the same batches, every acknowledged one among them.
      EXPECT_EQ(node.applied, nodes_[0].applied) << node.id;
      for (const auto& [id, at] : acknowledged_) {
        EXPECT_TRUE(node.applied.count(id)) << node.id << " lacks acknowledged " << id;
      }
    }
    // One writer per epoch: the valid batches of an epoch all come from its claimant.
    std::map<uint64_t, std::set<std::string>> writers;
    ShardLedger ledger;
    for (size_t offset = 0; offset < log_.size(); ++offset) {
      if (ledger.Apply(log_[offset], offset) == Verdict::kBatchValid) {
        writers[log_[offset].epoch()].insert(log_[offset].node_id());
      }
    }
    for (const auto& [epoch, nodes] : writers) EXPECT_EQ(nodes.size(), 1u) << "epoch " << epoch;
  }

  size_t acknowledged() const { return acknowledged_.size(); }
  size_t owners() const { return owners_; }
  size_t fenced_writes() const { return fenced_writes_; }

 private:
  static constexpr int kNodes = 3;
  enum class Role { kFollower, kClaiming, kOwner };
  struct Node {
    std::string id;
    ShardLedger ledger;
    size_t read = 0;
    Role role = Role::kFollower;
    int64_t claim_offset = -1;
    std::set<int64_t> unconfirmed;  // its batches not read back yet
    std::set<std::string> applied;
  };

  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void Step(Node& node) {
    const int action = Pick(10);
    if (action < 6 && node.read < log_.size()) {
      Read(node);
    } else if (action < 8 && node.role == Role::kOwner) {
      // An owner, or a zombie that has not read the newer claim yet.
      node.unconfirmed.insert(static_cast<int64_t>(log_.size()));
      log_.push_back(MakeBatch(node.ledger.owner(), node.id + "/" + std::to_string(log_.size())));
    } else if (action == 9 && node.role == Role::kFollower && Pick(4) == 0) {
      // It believes the owner gone, from what it has read so far.
      node.role = Role::kClaiming;
      node.claim_offset = static_cast<int64_t>(log_.size());
      log_.push_back(MakeClaim(node.ledger, node.id, node.id + ":50051", 0));
    }
  }

  void Read(Node& node) {
    const int64_t offset = static_cast<int64_t>(node.read++);
    const ShardLogRecord& record = log_[offset];
    const Verdict verdict = node.ledger.Apply(record, offset);
    if (verdict == Verdict::kBatchValid) node.applied.insert(record.journal_entry());
    if (offset == node.claim_offset) {
      node.claim_offset = -1;
      if (verdict == Verdict::kClaimAccepted) {
        // It serves from here on: everything acknowledged before its claim must be in its
        // state. (Batches after it are a newer owner's, whose claim it reads next, or fenced.)
        node.role = Role::kOwner;
        ++owners_;
        for (const auto& [id, at] : acknowledged_) {
          if (at < offset) {
            EXPECT_TRUE(node.applied.count(id)) << node.id << " lacks " << id;
          }
        }
      } else {
        node.role = Role::kFollower;
      }
    } else if (verdict == Verdict::kClaimAccepted && node.role == Role::kOwner) {
      node.role = Role::kFollower;  // someone else's claim: it steps down
    }
    if (node.unconfirmed.erase(offset)) {
      if (verdict == Verdict::kBatchValid) {
        acknowledged_.emplace(record.journal_entry(), offset);
      } else {
        // The acknowledgement point fails: the caller gets UNAVAILABLE, never success.
        EXPECT_EQ(verdict, Verdict::kBatchFenced);
        ++fenced_writes_;
      }
    }
  }

  std::mt19937 rng_;
  std::vector<ShardLogRecord> log_;
  Node nodes_[kNodes] = {{"a"}, {"b"}, {"c"}};
  std::map<std::string, int64_t> acknowledged_;  // id -> its offset
  size_t owners_ = 0, fenced_writes_ = 0;
};

TEST(ShardLedgerTest, RandomInterleavingsLoseNoAcknowledgedBatchAndFenceEveryZombie) {
  size_t acknowledged = 0, owners = 0, fenced = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation simulation(seed);
    simulation.Run(400);
    simulation.CheckInvariants();
    acknowledged += simulation.acknowledged();
    owners += simulation.owners();
    fenced += simulation.fenced_writes();
  }
  // The runs did exercise takeovers and zombies, not only a quiet owner.
  EXPECT_GT(owners, 600u);
  EXPECT_GT(fenced, 100u);
  EXPECT_GT(acknowledged, 10'000u);
}

}  // namespace
}  // namespace feed::cluster

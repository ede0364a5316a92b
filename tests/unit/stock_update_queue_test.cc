// StockUpdateQueue: the per-stream queue of stock updates, in sequence order, conflating
// only for a reader that is behind.
#include "core/stock_update_queue.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace feed::core {
namespace {

using inventory::v1::StockLevel;
using inventory::v1::StockUpdate;

StockLevel Level(const std::string& sku, const std::string& location, int64_t on_hand,
                 uint64_t version) {
  StockLevel l;
  l.set_sku(sku);
  l.set_location(location);
  l.set_on_hand(on_hand);
  l.set_reserved(2);
  l.set_available(on_hand - 2);
  l.set_version(version);
  l.set_allow_backorder(version % 2 == 1);
  l.set_updated_at_ms(1000 + static_cast<int64_t>(version));
  l.set_sequence(100 + version);
  return l;
}

// (sku, version, sequence) of everything left in the queue.
std::vector<std::tuple<std::string, uint64_t, uint64_t>> Drain(StockUpdateQueue& q) {
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> out;
  while (auto u = q.Pop()) out.emplace_back(u->level().sku(), u->level().version(), u->sequence());
  return out;
}

TEST(StockUpdateQueueTest, PopsEveryFieldInSequenceOrder) {
  StockUpdateQueue q(QueueLimits{100, 100});
  ASSERT_TRUE(q.Push(Level("a-sku-with-a-long-name", "warehouse-north", 5, 1), 7));
  ASSERT_TRUE(q.Push(Level("b", "", 9, 3), 8, StockUpdate::KIND_SNAPSHOT));
  auto first = q.Pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->kind(), StockUpdate::KIND_CHANGE);
  EXPECT_EQ(first->sequence(), 7u);
  EXPECT_FALSE(first->conflated());
  const StockLevel& l = first->level();
  EXPECT_EQ(l.sku(), "a-sku-with-a-long-name");
  EXPECT_EQ(l.location(), "warehouse-north");
  EXPECT_EQ(l.on_hand(), 5);
  EXPECT_EQ(l.reserved(), 2);
  EXPECT_EQ(l.available(), 3);
  EXPECT_EQ(l.version(), 1u);
  EXPECT_TRUE(l.allow_backorder());
  EXPECT_EQ(l.updated_at_ms(), 1001);
  EXPECT_EQ(l.sequence(), 101u);
  auto second = q.Pop();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->kind(), StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(second->level().location(), "");
  EXPECT_FALSE(q.Pop().has_value());
}

TEST(StockUpdateQueueTest, BelowTheThresholdEveryChangeIsKept) {
  StockUpdateQueue q(QueueLimits{4, 100});
  for (uint64_t v = 1; v <= 4; ++v) ASSERT_TRUE(q.Push(Level("a", "x", 10, v), v));
  auto all = Drain(q);
  ASSERT_EQ(all.size(), 4u);
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_EQ(std::get<1>(all[v - 1]), v);
  EXPECT_EQ(q.conflated(), 0u);
}

TEST(StockUpdateQueueTest, AnOlderUpdateOfALevelLeavingFirstKeepsItsNewerOneFindable) {
  StockUpdateQueue q(QueueLimits{3, 100});
  ASSERT_TRUE(q.Push(Level("level-with-a-long-name", "x", 1, 1), 1));
  ASSERT_TRUE(q.Push(Level("level-with-a-long-name", "x", 2, 2), 2));
  ASSERT_TRUE(q.Pop().has_value());  // the older one leaves; its key string goes with it
  ASSERT_TRUE(q.Push(Level("b", "x", 1, 1), 3));
  ASSERT_TRUE(q.Push(Level("c", "x", 1, 1), 4));
  // Behind now: the level's waiting update (v2) is found and superseded.
  ASSERT_TRUE(q.Push(Level("level-with-a-long-name", "x", 3, 3), 5));
  auto all = Drain(q);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(std::get<1>(all[2]), 3u);
  EXPECT_EQ(q.conflated(), 1u);
}

TEST(StockUpdateQueueTest, BehindAChangeSupersedesItsQueuedLevelAndKeepsSequenceOrder) {
  StockUpdateQueue q(QueueLimits{2, 100});
  ASSERT_TRUE(q.Push(Level("a", "x", 1, 1), 10));
  ASSERT_TRUE(q.Push(Level("b", "x", 1, 1), 11));
  // Two waiting: behind. a's newer level replaces the queued one and moves to the end.
  ASSERT_TRUE(q.Push(Level("a", "x", 2, 2), 12));
  ASSERT_TRUE(q.Push(Level("c", "x", 1, 1), 13));  // a new level is appended
  auto b = q.Pop();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->level().sku(), "b");
  EXPECT_FALSE(b->conflated());
  auto a = q.Pop();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->level().sku(), "a");
  EXPECT_EQ(a->level().version(), 2u);
  EXPECT_EQ(a->sequence(), 12u);
  EXPECT_TRUE(a->conflated());
  auto c = q.Pop();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->sequence(), 13u);
  EXPECT_EQ(q.conflated(), 1u);
}

TEST(StockUpdateQueueTest, ASupersededSnapshotRowStaysASnapshotRow) {
  StockUpdateQueue q(QueueLimits{1, 10});
  ASSERT_TRUE(q.Push(Level("a", "x", 1, 1), 5, StockUpdate::KIND_SNAPSHOT));
  ASSERT_TRUE(q.Push(Level("a", "x", 2, 2), 6));
  auto u = q.Pop();
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->kind(), StockUpdate::KIND_SNAPSHOT);
  EXPECT_TRUE(u->conflated());
  EXPECT_EQ(u->level().on_hand(), 2);
  EXPECT_FALSE(q.Pop().has_value());
}

TEST(StockUpdateQueueTest, AReaderMarkedBehindGetsConflatedAtOnce) {
  StockUpdateQueue q(QueueLimits{100, 100});
  q.set_reader_behind(true);
  ASSERT_TRUE(q.Push(Level("a", "x", 1, 1), 1));
  ASSERT_TRUE(q.Push(Level("a", "x", 2, 2), 2));
  q.set_reader_behind(false);
  ASSERT_TRUE(q.Push(Level("a", "x", 3, 3), 3));
  auto all = Drain(q);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(std::get<1>(all[0]), 2u);
  EXPECT_EQ(std::get<1>(all[1]), 3u);
}

TEST(StockUpdateQueueTest, ReportsOverflowPastMaxQueued) {
  StockUpdateQueue q(QueueLimits{3, 3});
  EXPECT_TRUE(q.Push(Level("a", "", 1, 1), 1));
  EXPECT_TRUE(q.Push(Level("b", "", 1, 1), 2));
  EXPECT_TRUE(q.Push(Level("c", "", 1, 1), 3));
  EXPECT_TRUE(q.Push(Level("a", "", 2, 2), 4));  // behind: replaces, no growth
  EXPECT_FALSE(q.Push(Level("d", "", 1, 1), 5));
}

TEST(StockUpdateQueueTest, MemoryOfAStalledReaderGrowsOnlyWithDistinctLevels) {
  StockUpdateQueue q(QueueLimits{8, 100});
  for (uint64_t seq = 1; seq <= 100'000; ++seq) {
    ASSERT_TRUE(q.Push(Level("hot-" + std::to_string(seq % 5), "x", 1, seq), seq));
  }
  EXPECT_LE(q.size(), 8u);
  // Still in sequence order, the newest of each level last.
  uint64_t last = 0;
  while (auto u = q.Pop()) {
    EXPECT_GT(u->sequence(), last);
    last = u->sequence();
  }
  EXPECT_EQ(last, 100'000u);
}

TEST(StockUpdateQueueTest, SnapshotRowsGoAtTheirCutAndDropThroughRemovesWhatTheyCover) {
  StockUpdateQueue q(QueueLimits{100, 100});
  ASSERT_TRUE(q.Push(Level("old", "x", 1, 1), 10));
  ASSERT_TRUE(q.Push(Level("new", "x", 1, 4), 11));  // in the snapshot taken at 12
  ASSERT_TRUE(q.Push(Level("old", "x", 2, 2), 13));
  ASSERT_TRUE(q.Push(Level("new", "x", 2, 6), 14));  // after the cut: kept
  q.DropThrough(12, [](std::string_view sku, std::string_view) { return sku == "new"; });
  ASSERT_TRUE(q.InsertSnapshotRow(Level("new", "x", 1, 5), 12));
  auto all = Drain(q);
  using T = std::tuple<std::string, uint64_t, uint64_t>;
  EXPECT_EQ(all,
            (std::vector<T>{T{"old", 1, 10}, T{"new", 5, 12}, T{"old", 2, 13}, T{"new", 6, 14}}));
}

TEST(StockUpdateQueueTest, ConflationAfterASnapshotRowKeepsTheNewestOnly) {
  StockUpdateQueue q(QueueLimits{1, 100});
  ASSERT_TRUE(q.Push(Level("other", "x", 1, 1), 3));
  ASSERT_TRUE(q.InsertSnapshotRow(Level("a", "x", 1, 7), 5));
  ASSERT_TRUE(q.Push(Level("a", "x", 1, 8), 6));  // behind: supersedes the row
  auto all = Drain(q);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(std::get<0>(all[1]), "a");
  EXPECT_EQ(std::get<1>(all[1]), 8u);
}

TEST(StockUpdateQueueTest, KeysStayValidAcrossManyPushesAndPops) {
  StockUpdateQueue q(QueueLimits{64, 100'000});
  uint64_t seq = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(q.Push(Level("sku-" + std::to_string(i), "loc-" + std::to_string(i % 3), i,
                               static_cast<uint64_t>(round)),
                         ++seq));
    }
    for (int i = 0; i < 150; ++i) ASSERT_TRUE(q.Pop().has_value());
  }
  uint64_t last = 0;
  while (auto u = q.Pop()) {
    EXPECT_GT(u->sequence(), last);
    last = u->sequence();
  }
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace feed::core

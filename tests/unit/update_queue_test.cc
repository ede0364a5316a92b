// ConflatingQueue: the per-stream queue of stock updates for a slow reader.
#include "server/update_queue.h"

#include "gtest/gtest.h"

namespace feed::server {
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

TEST(ConflatingQueueTest, PopsEveryFieldInOrderOfFirstChange) {
  ConflatingQueue q(10);
  ASSERT_TRUE(q.PushLevel(Level("a-sku-with-a-long-name", "warehouse-north", 5, 1), 7));
  ASSERT_TRUE(q.PushLevel(Level("b", "", 9, 3), 8, StockUpdate::KIND_SNAPSHOT));
  EXPECT_EQ(q.size(), 2u);

  auto first = q.Pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->kind(), StockUpdate::KIND_CHANGE);
  EXPECT_EQ(first->sequence(), 7u);
  EXPECT_FALSE(first->conflated());
  const StockLevel want = Level("a-sku-with-a-long-name", "warehouse-north", 5, 1);
  EXPECT_EQ(first->level().SerializeAsString(), want.SerializeAsString());

  auto second = q.Pop();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->kind(), StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(second->level().sku(), "b");
  EXPECT_EQ(second->level().location(), "");
  EXPECT_EQ(second->level().on_hand(), 9);
  EXPECT_FALSE(q.Pop().has_value());
  EXPECT_TRUE(q.empty());
}

TEST(ConflatingQueueTest, ANewerChangeOfAQueuedLevelReplacesItInPlace) {
  ConflatingQueue q(10);
  q.PushLevel(Level("a", "x", 1, 1), 1);
  q.PushLevel(Level("b", "x", 1, 1), 2);
  q.PushLevel(Level("a", "x", 4, 2), 3);
  // Same SKU, other location: a different level.
  q.PushLevel(Level("a", "y", 6, 1), 4);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.conflated(), 1u);

  auto a = q.Pop();
  EXPECT_EQ(a->level().sku(), "a");
  EXPECT_EQ(a->level().on_hand(), 4);
  EXPECT_EQ(a->level().version(), 2u);
  EXPECT_EQ(a->sequence(), 3u);
  EXPECT_TRUE(a->conflated());
  EXPECT_EQ(q.Pop()->level().sku(), "b");
  auto ay = q.Pop();
  EXPECT_EQ(ay->level().location(), "y");
  EXPECT_FALSE(ay->conflated());
}

TEST(ConflatingQueueTest, AConflatedSnapshotRowStaysASnapshotRow) {
  ConflatingQueue q(10);
  q.PushLevel(Level("a", "x", 1, 1), 1, StockUpdate::KIND_SNAPSHOT);
  q.PushLevel(Level("a", "x", 3, 2), 2);
  auto u = q.Pop();
  EXPECT_EQ(u->kind(), StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(u->level().on_hand(), 3);
  EXPECT_TRUE(u->conflated());
}

TEST(ConflatingQueueTest, ReportsOverflowPastMaxDistinctLevels) {
  ConflatingQueue q(2);
  EXPECT_TRUE(q.PushLevel(Level("a", "", 1, 1), 1));
  EXPECT_TRUE(q.PushLevel(Level("b", "", 1, 1), 2));
  // Changes of queued levels never overflow: they replace.
  EXPECT_TRUE(q.PushLevel(Level("a", "", 2, 2), 3));
  EXPECT_FALSE(q.PushLevel(Level("c", "", 1, 1), 4));
}

TEST(ConflatingQueueTest, KeysStayValidAcrossManyPushesAndPops) {
  // The map's keys view the deque's strings: interleaved pushes and pops must keep them valid.
  ConflatingQueue q(100000);
  uint64_t seq = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 1000; ++i) {
      q.PushLevel(Level("sku-number-" + std::to_string((round * 37 + i) % 1500), "loc", i, 1), ++seq);
    }
    for (int i = 0; i < 700 && !q.empty(); ++i) {
      auto u = q.Pop();
      ASSERT_TRUE(u.has_value());
      ASSERT_EQ(u->level().sku().rfind("sku-number-", 0), 0u);
      ASSERT_EQ(u->level().location(), "loc");
    }
  }
  size_t left = 0;
  while (q.Pop()) ++left;
  EXPECT_GT(left, 0u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace feed::server

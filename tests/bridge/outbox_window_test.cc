// OutboxWindow: the relay's window and cursor bookkeeping, without a broker.
#include "outbox_window.h"

#include "gtest/gtest.h"

namespace feed::bridge::internal {
namespace {

TEST(OutboxWindowTest, TheCursorMovesOnlyOverTheAcknowledgedPrefix) {
  OutboxWindow w;
  w.Reset(10);
  for (uint64_t s = 10; s < 15; ++s) w.Produced(s, 1000 + static_cast<int64_t>(s));
  EXPECT_EQ(w.next_read(), 15u);
  EXPECT_EQ(w.in_flight(), 5u);
  EXPECT_EQ(w.oldest_unacked_ms(), 1010);
  EXPECT_TRUE(w.Ack(11, 0));
  EXPECT_TRUE(w.Ack(12, 0));
  EXPECT_FALSE(w.AckedPrefix().has_value()) << "10 is not acknowledged yet";
  EXPECT_TRUE(w.Ack(10, 0));
  auto range = w.AckedPrefix();
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->from, 10u);
  EXPECT_EQ(range->until, 13u);
  EXPECT_EQ(w.acked_through(), 13u);
  EXPECT_EQ(w.cursor(), 10u) << "the cursor moves once the outbox has committed the delete";
  w.Committed(range->until);
  EXPECT_EQ(w.cursor(), 13u);
  EXPECT_FALSE(w.AckedPrefix().has_value());
  EXPECT_EQ(w.oldest_unacked_ms(), 1013);
}

TEST(OutboxWindowTest, ARestartResendsFromTheAcknowledgedPrefixAndIgnoresOlderReports) {
  OutboxWindow w;
  w.Reset(1);
  for (uint64_t s = 1; s <= 4; ++s) w.Produced(s, 0);
  EXPECT_TRUE(w.Ack(1, 0));
  // 2 failed, 3 got through: after the restart 2 and 3 are read again (per-key order).
  EXPECT_TRUE(w.Ack(3, 0));
  w.AckedPrefix();
  w.Restart();
  EXPECT_EQ(w.generation(), 1u);
  EXPECT_EQ(w.next_read(), 2u);
  EXPECT_EQ(w.in_flight(), 0u);
  EXPECT_FALSE(w.Ack(4, 0)) << "a report from before the restart acknowledged a slot";
  w.Produced(2, 0);
  EXPECT_FALSE(w.Ack(2, 0));
  EXPECT_TRUE(w.Ack(2, 1));
  auto range = w.AckedPrefix();
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->from, 1u);
  EXPECT_EQ(range->until, 3u);
}

TEST(OutboxWindowTest, AnEntryProducedAsAcknowledgedIsPassedOver) {
  OutboxWindow w;
  w.Reset(5);
  w.Produced(5, 0);
  w.Produced(6, 0, /*acked=*/true);  // unreadable: skipped, deleted with the prefix
  w.Produced(7, 0);
  EXPECT_TRUE(w.Ack(5, 0));
  EXPECT_TRUE(w.Ack(7, 0));
  auto range = w.AckedPrefix();
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->until, 8u);
  EXPECT_FALSE(w.Ack(9, 0)) << "a sequence never produced";
}

}  // namespace
}  // namespace feed::bridge::internal

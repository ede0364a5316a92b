// Unit tests of the core: Idempotency keys: replays, conflicts, retention and concurrent
// duplicates. Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// Idempotency

TEST_F(CoreTest, SameKeySameRequestIsReplayedWithoutNewEvents) {
  auto a1 = Adjust("sku-a", 10, inv::ADJUST_MODE_DELTA, "adj-1");
  ASSERT_OK(a1);
  auto a2 = Adjust("sku-a", 10, inv::ADJUST_MODE_DELTA, "adj-1");
  ASSERT_OK(a2);
  EXPECT_FALSE(a1->replayed());
  EXPECT_TRUE(a2->replayed());
  EXPECT_EQ(a2->sequence(), a1->sequence());
  EXPECT_TRUE(ProtoEq(a2->level(), a1->level()));
  EXPECT_EQ(Level("sku-a").on_hand(), 10);

  auto r1 = Reserve({{"sku-a", 2}}, "", "rsv-key");
  ASSERT_OK(r1);
  size_t after_reserve = EventCount();
  // An empty location and the default location are the same request.
  auto r2 = Reserve({{"sku-a", 2, "default"}}, "", "rsv-key");
  ASSERT_OK(r2);
  EXPECT_TRUE(r2->replayed());
  EXPECT_EQ(r2->reservation().reservation_id(), r1->reservation().reservation_id());
  EXPECT_EQ(r2->sequence(), r1->sequence());
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  EXPECT_EQ(EventCount(), after_reserve);

  std::string id = r1->reservation().reservation_id();
  auto c1 = Commit(id, "commit-key");
  ASSERT_OK(c1);
  auto c2 = Commit(id, "commit-key");
  ASSERT_OK(c2);
  EXPECT_TRUE(c2->replayed());
  EXPECT_EQ(c2->reservation().state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(c2->sequence(), c1->sequence());

  auto rel_hold = Reserve({{"sku-a", 1}});
  ASSERT_OK(rel_hold);
  auto l1 = Release(rel_hold->reservation().reservation_id(), "r", "release-key");
  ASSERT_OK(l1);
  auto l2 = Release(rel_hold->reservation().reservation_id(), "r", "release-key");
  ASSERT_OK(l2);
  EXPECT_TRUE(l2->replayed());

  auto o1 = CreateOrder({"sku-a"}, {}, "order-key");
  ASSERT_OK(o1);
  auto o2 = CreateOrder({"sku-a"}, {}, "order-key");
  ASSERT_OK(o2);
  EXPECT_TRUE(o2->replayed());
  EXPECT_EQ(o2->order_id(), o1->order_id());
  EXPECT_EQ(o2->reservation_id(), o1->reservation_id());
  EXPECT_EQ(StoreSize(Table::kOrders), 1u);

  auto p1 = Pay(o1->order_id(), "ref", "pay-key");
  ASSERT_OK(p1);
  auto p2 = Pay(o1->order_id(), "ref", "pay-key");
  ASSERT_OK(p2);
  EXPECT_TRUE(p2->replayed());
  EXPECT_EQ(p2->sequence(), p1->sequence());
  auto v1 = Advance(o1->order_id(), ord::ORDER_STATUS_PACKING, "", "adv-key");
  ASSERT_OK(v1);
  auto v2 = Advance(o1->order_id(), ord::ORDER_STATUS_PACKING, "", "adv-key");
  ASSERT_OK(v2);
  EXPECT_TRUE(v2->replayed());
  auto x1 = Cancel(o1->order_id(), "", "cancel-key");
  ASSERT_OK(x1);
  size_t events = EventCount();
  auto x2 = Cancel(o1->order_id(), "", "cancel-key");
  ASSERT_OK(x2);
  EXPECT_TRUE(x2->replayed());
  EXPECT_EQ(x2->order().status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_EQ(EventCount(), events);
  EXPECT_EQ(Level("sku-a").on_hand(), 8);  // 10 - 2 committed; the cancelled unit came back
}

TEST_F(CoreTest, SameKeyDifferentRequestIsAlreadyExists) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 2}}, "", "k-1"));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 3}}, "", "k-1"), absl::StatusCode::kAlreadyExists,
                      "idempotency_key 'k-1' was already used with a different"));
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  EXPECT_EQ(EventCount(), before);
}

TEST_F(CoreTest, SameKeyOnAnotherMethodIsAlreadyExists) {
  ASSERT_OK(Adjust("sku-a", 10, inv::ADJUST_MODE_DELTA, "k-1"));
  size_t before = EventCount();
  auto r = Reserve({{"sku-a", 2}}, "", "k-1");
  EXPECT_TRUE(IsError(r, absl::StatusCode::kAlreadyExists, "inventory.v1.AdjustStock"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("inventory.v1.Reserve"));
  EXPECT_TRUE(IsError(CreateOrder({"sku-a"}, {}, "k-1"), absl::StatusCode::kAlreadyExists,
                      "order.v1.CreateOrder"));
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(EventCount(), before);
}

TEST_F(CoreTest, KeyIsFreeAgainAfterRetention) {
  ASSERT_OK(Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1"));
  clock_.Advance(options_.idempotency_retention_ms);  // still inside the window
  auto replay = Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1");
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed());
  clock_.Advance(1);
  auto fresh = Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1");
  ASSERT_OK(fresh);
  EXPECT_FALSE(fresh->replayed());
  EXPECT_EQ(fresh->level().on_hand(), 2);
  auto replay2 = Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1");
  ASSERT_OK(replay2);
  EXPECT_TRUE(replay2->replayed());
  EXPECT_EQ(Level("sku-a").on_hand(), 2);
}

TEST_F(CoreTest, FailedCommandCanBeRetriedWithTheSameKey) {
  ASSERT_OK(Adjust("sku-a", 1));
  size_t records = StoreSize(Table::kIdempotency);
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 5}}, "", "k-1"), absl::StatusCode::kFailedPrecondition,
                      "available 1"));
  EXPECT_EQ(StoreSize(Table::kIdempotency), records);  // failures record nothing
  ASSERT_OK(Adjust("sku-a", 10));
  auto ok = Reserve({{"sku-a", 5}}, "", "k-1");
  ASSERT_OK(ok);
  EXPECT_FALSE(ok->replayed());
  auto again = Reserve({{"sku-a", 5}}, "", "k-1");
  ASSERT_OK(again);
  EXPECT_TRUE(again->replayed());
  EXPECT_EQ(again->reservation().reservation_id(), ok->reservation().reservation_id());
  EXPECT_EQ(Level("sku-a").reserved(), 5);

  // The stored record (in the table once checkpointed) says which method and request it
  // belongs to. (A Reserve keeps its key in its reservation: core_reservation_key_test.cc.)
  ASSERT_OK(Adjust("sku-a", 5, inv::ADJUST_MODE_DELTA, "k-2"));
  ASSERT_OK(core_->Checkpoint());
  auto stored = store_.Get(Table::kIdempotency, "k-2");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  int64_t created = 0;
  std::string_view payload;
  ASSERT_TRUE(storage::DecodeTimestamped(**stored, &created, &payload));
  EXPECT_EQ(created, kStart);
  internal::v1::IdempotencyRecord record;
  ASSERT_TRUE(record.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  EXPECT_EQ(record.method(), "inventory.v1.AdjustStock");
  EXPECT_EQ(record.created_at_ms(), kStart);
}

TEST_F(CoreTest, ConcurrentDuplicatesOfOneKeyApplyOnce) {
  ASSERT_OK(Adjust("sku-a", 100));
  size_t before = EventCount();
  constexpr int kCalls = 50;
  Collector<inv::ReserveResponse> collector(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    core_->Reserve(ReserveReq({{"sku-a", 1}}, "", "burst"), collector.Callback());
  }
  auto results = collector.Wait();
  ASSERT_EQ(results.size(), static_cast<size_t>(kCalls));
  int fresh = 0;
  std::string id;
  for (const auto& r : results) {
    ASSERT_OK(r);
    if (!r->replayed()) ++fresh;
    if (id.empty()) id = r->reservation().reservation_id();
    EXPECT_EQ(r->reservation().reservation_id(), id);
  }
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(Level("sku-a").reserved(), 1);
  EXPECT_EQ(EventCount(), before + 1);
}

}  // namespace
}  // namespace feed::core_test

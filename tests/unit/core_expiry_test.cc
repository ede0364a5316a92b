// Unit tests of the core: Hold expiry, the sweep and the retention of closed history.
// Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// Expiry

TEST_F(CoreTest, ExpiredHoldIsRefusedThenSweptBackToStock) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 4}}, "", "", 5'000);
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  EXPECT_EQ(r->reservation().expires_at_ms(), kStart + 5'000);

  clock_.Advance(4'999);
  auto none = ExpireDue();
  ASSERT_OK(none);
  EXPECT_EQ(none->expired_holds, 0u);
  EXPECT_EQ(core_->GetReservation(id)->state(), inv::RESERVATION_STATE_HELD);

  clock_.Advance(1);  // expires_at is the first instant the hold is no longer valid
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition, "expired"));
  EXPECT_TRUE(IsError(Release(id), absl::StatusCode::kFailedPrecondition, "expired"));
  EXPECT_EQ(Level("sku-a").reserved(), 4);  // not swept yet
  EXPECT_EQ(EventCount(), before);

  auto swept = ExpireDue();
  ASSERT_OK(swept);
  EXPECT_EQ(swept->expired_holds, 1u);
  EXPECT_EQ(swept->expired_orders, 0u);
  auto got = core_->GetReservation(id);
  ASSERT_OK(got);
  EXPECT_EQ(got->state(), inv::RESERVATION_STATE_EXPIRED);
  EXPECT_EQ(got->close_reason(), "hold expired");
  EXPECT_EQ(got->closed_at_ms(), kStart + 5'000);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 10);
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_EXPIRE);
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), -4);

  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition, "already EXPIRED"));
  auto again = ExpireDue();
  ASSERT_OK(again);
  EXPECT_EQ(again->expired_holds, 0u);
  EXPECT_EQ(core_->stats().held_reservations, 0u);
}

TEST_F(CoreTest, ClosedReservationsAndFinishedOrdersAreGonePastTheHistoryRetention) {
  options_.history_retention_ms = 60'000;
  Reopen();
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 1}}, "cart-1"));
  ASSERT_OK(Commit("cart-1"));
  auto held = Reserve({{"sku-a", 1}}, "", "", 7LL * 24 * 3600 * 1000);
  ASSERT_OK(held);
  auto cancelled = CreateOrder({"sku-a"});
  ASSERT_OK(cancelled);
  ASSERT_OK(Cancel(cancelled->order_id()));
  auto confirmed = CreateOrder({"sku-a"}, {}, "", 7LL * 24 * 3600 * 1000);
  ASSERT_OK(confirmed);

  clock_.Advance(60'000);  // exactly the retention: still kept
  EXPECT_EQ(core_->GetReservation("cart-1")->state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(core_->GetOrder(cancelled->order_id())->status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_TRUE(
      IsError(Commit("cart-1"), absl::StatusCode::kFailedPrecondition, "already COMMITTED"));

  clock_.Advance(1);
  EXPECT_TRUE(IsError(core_->GetReservation("cart-1"), absl::StatusCode::kNotFound,
                      "reservation 'cart-1' not found"));
  EXPECT_TRUE(
      IsError(core_->GetOrder(cancelled->order_id()), absl::StatusCode::kNotFound, "not found"));
  EXPECT_TRUE(IsError(Commit("cart-1"), absl::StatusCode::kNotFound, "reservation 'cart-1'"));
  EXPECT_TRUE(IsError(Cancel(cancelled->order_id()), absl::StatusCode::kNotFound, "not found"));
  // What is still under way stays, however old.
  EXPECT_EQ(core_->GetReservation(held->reservation().reservation_id())->state(),
            inv::RESERVATION_STATE_HELD);
  EXPECT_EQ(core_->GetOrder(confirmed->order_id())->status(), ord::ORDER_STATUS_CONFIRMED);
  // A client's reservation id is free again.
  auto reused = Reserve({{"sku-a", 2}}, "cart-1");
  ASSERT_OK(reused);
  EXPECT_EQ(reused->reservation().state(), inv::RESERVATION_STATE_HELD);
  ASSERT_OK(Commit("cart-1"));
  EXPECT_EQ(Level("sku-a").on_hand(), 7);
}

TEST(HistoryTest, WhatExpiresAndWhatIsKept) {
  const int64_t kDay = 24LL * 3600 * 1000;
  inv::Reservation closed;
  closed.set_state(inv::RESERVATION_STATE_RELEASED);
  closed.set_closed_at_ms(kStart);
  inv::Reservation held;
  held.set_state(inv::RESERVATION_STATE_HELD);
  ord::Order delivered;
  delivered.set_status(ord::ORDER_STATUS_DELIVERED);
  delivered.set_updated_at_ms(kStart);
  ord::Order packing = delivered;
  packing.set_status(ord::ORDER_STATUS_PACKING);

  EXPECT_FALSE(core::ReservationExpired(closed, kStart + kDay, kDay));
  EXPECT_TRUE(core::ReservationExpired(closed, kStart + kDay + 1, kDay));
  EXPECT_FALSE(core::ReservationExpired(closed, kStart + 1000 * kDay, 0));  // 0: for good
  EXPECT_FALSE(core::ReservationExpired(held, kStart + 1000 * kDay, kDay));
  EXPECT_TRUE(core::OrderExpired(delivered, kStart + kDay + 1, kDay));
  EXPECT_FALSE(core::OrderExpired(packing, kStart + 1000 * kDay, kDay));
  for (auto status : {ord::ORDER_STATUS_CANCELLED, ord::ORDER_STATUS_EXPIRED}) {
    ord::Order o = delivered;
    o.set_status(status);
    EXPECT_TRUE(core::OrderExpired(o, kStart + kDay + 1, kDay)) << status;
  }
  for (auto status :
       {ord::ORDER_STATUS_CONFIRMED, ord::ORDER_STATUS_PAID, ord::ORDER_STATUS_DISPATCHED}) {
    ord::Order o = delivered;
    o.set_status(status);
    EXPECT_FALSE(core::OrderExpired(o, kStart + 1000 * kDay, kDay)) << status;
  }

  // Stored records, as the compaction filter sees them.
  const int64_t later = kStart + kDay + 1;
  EXPECT_TRUE(core::HistoryExpired(Table::kReservations, closed.SerializeAsString(), later, kDay));
  EXPECT_TRUE(core::HistoryExpired(Table::kOrders, delivered.SerializeAsString(), later, kDay));
  EXPECT_FALSE(core::HistoryExpired(Table::kOrders, packing.SerializeAsString(), later, kDay));
  EXPECT_FALSE(core::HistoryExpired(Table::kHolds, closed.SerializeAsString(), later, kDay));
  EXPECT_FALSE(core::HistoryExpired(Table::kReservations, "\xff\xff not a record", later, kDay));
}

TEST_F(CoreTest, ExpiringOrderHoldExpiresTheOrder) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a", "sku-a"}, {}, "", 2'000);
  ASSERT_OK(o);
  EXPECT_EQ(o->hold_expires_at_ms(), kStart + 2'000);
  clock_.Advance(2'000);
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Pay(o->order_id()), absl::StatusCode::kFailedPrecondition, "expired"));
  EXPECT_EQ(EventCount(), before);

  auto swept = ExpireDue();
  ASSERT_OK(swept);
  EXPECT_EQ(swept->expired_holds, 1u);
  EXPECT_EQ(swept->expired_orders, 1u);
  auto order = core_->GetOrder(o->order_id());
  ASSERT_OK(order);
  EXPECT_EQ(order->status(), ord::ORDER_STATUS_EXPIRED);
  EXPECT_EQ(order->details(), "stock hold expired before payment");
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(core_->GetReservation(o->reservation_id())->state(), inv::RESERVATION_STATE_EXPIRED);

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_EXPIRE);
  EXPECT_EQ(events[0].stock_changed().order_id(), o->order_id());
  EXPECT_EQ(events[1].type(), "order.status.changed");
  EXPECT_EQ(events[1].key(), o->order_id());
  EXPECT_EQ(events[1].order_status_changed().status(), ord::ORDER_STATUS_EXPIRED);
  EXPECT_EQ(events[1].order_status_changed().status_name(), "EXPIRED");
  EXPECT_EQ(events[1].order_status_changed().previous_status(), ord::ORDER_STATUS_CONFIRMED);

  EXPECT_TRUE(IsError(Pay(o->order_id()), absl::StatusCode::kFailedPrecondition, "is EXPIRED"));
  EXPECT_TRUE(IsError(Cancel(o->order_id()), absl::StatusCode::kFailedPrecondition, "is EXPIRED"));
  EXPECT_TRUE(core::IsTerminal(ord::ORDER_STATUS_EXPIRED));
}

class SmallSweepTest : public CoreTest {
 protected:
  SmallSweepTest() { options_.max_expiries_per_sweep = 2; }
};

TEST_F(SmallSweepTest, ExpireDueIsBoundedPerCall) {
  ASSERT_OK(Adjust("sku-a", 10));
  for (int i = 0; i < 5; ++i) ASSERT_OK(Reserve({{"sku-a", 1}}, "", "", 1'000));
  clock_.Advance(1'000);
  EXPECT_EQ(ExpireDue()->expired_holds, 2u);
  EXPECT_EQ(ExpireDue()->expired_holds, 2u);
  EXPECT_EQ(ExpireDue()->expired_holds, 1u);
  EXPECT_EQ(ExpireDue()->expired_holds, 0u);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
}

}  // namespace
}  // namespace feed::core_test

// Unit tests of the core: Orders: create, pay, advance, cancel and their holds and receipts.
// Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// Orders

TEST_F(CoreTest, CreateOrderHoldsStockAndIsConfirmed) {
  ASSERT_OK(Adjust("sku-a", 5));
  ASSERT_OK(Adjust("sku-b", 5));
  ASSERT_OK(Adjust("sku-c", 5, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  size_t before = EventCount();
  clock_.Advance(1'234);

  auto o = CreateOrder({"sku-a", "sku-b", "sku-a"}, {{"sku-c", 2, "wh-2"}}, "", 0, 42.5);
  ASSERT_OK(o);
  EXPECT_THAT(o->order_id(), StartsWith("ord-"));
  EXPECT_EQ(o->status(), "CONFIRMED");
  EXPECT_EQ(o->status_code(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_EQ(o->timestamp(), (kStart + 1'234) / 1000);  // Unix seconds, as in the seed
  EXPECT_FALSE(o->reservation_id().empty());
  EXPECT_EQ(o->hold_expires_at_ms(), kStart + 1'234 + kDefaultTtl);
  EXPECT_FALSE(o->replayed());

  // Three levels held, one status event.
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(events[i].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RESERVE);
    EXPECT_EQ(events[i].stock_changed().order_id(), o->order_id());
  }
  const auto& status = events[3];
  EXPECT_EQ(status.type(), "order.status.changed");
  EXPECT_EQ(status.key(), o->order_id());
  EXPECT_EQ(status.order_status_changed().status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_EQ(status.order_status_changed().status_name(), "CONFIRMED");
  EXPECT_EQ(status.order_status_changed().customer_id(), "cust-1");
  EXPECT_EQ(o->sequence(), status.sequence());

  auto order = core_->GetOrder(o->order_id());
  ASSERT_OK(order);
  EXPECT_EQ(order->customer_id(), "cust-1");
  EXPECT_EQ(order->status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_DOUBLE_EQ(order->total_amount(), 42.5);
  EXPECT_EQ(order->reservation_id(), o->reservation_id());
  EXPECT_EQ(order->created_at_ms(), kStart + 1'234);
  EXPECT_EQ(order->sequence(), status.sequence());
  ASSERT_EQ(order->lines_size(), 3);
  EXPECT_EQ(order->lines(0).sku(), "sku-a");
  EXPECT_EQ(order->lines(0).location(), "default");
  EXPECT_EQ(order->lines(0).quantity(), 2);  // two item_ids of sku-a: one unit each
  EXPECT_EQ(order->lines(1).sku(), "sku-b");
  EXPECT_EQ(order->lines(1).quantity(), 1);
  EXPECT_EQ(order->lines(2).sku(), "sku-c");
  EXPECT_EQ(order->lines(2).location(), "wh-2");
  EXPECT_EQ(order->lines(2).quantity(), 2);

  auto hold = core_->GetReservation(o->reservation_id());
  ASSERT_OK(hold);
  EXPECT_EQ(hold->state(), inv::RESERVATION_STATE_HELD);
  EXPECT_TRUE(hold->owned_by_order());
  EXPECT_EQ(hold->order_id(), o->order_id());
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  EXPECT_EQ(Level("sku-b").reserved(), 1);
  EXPECT_EQ(Level("sku-c", "wh-2").reserved(), 2);
  EXPECT_EQ(core::OrderStatusName(ord::ORDER_STATUS_CONFIRMED), "CONFIRMED");
}

TEST_F(CoreTest, CreateOrderWithoutStockCreatesNothing) {
  ASSERT_OK(Adjust("sku-a", 1));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(CreateOrder({"sku-a", "sku-a"}), absl::StatusCode::kFailedPrecondition,
                      "sku 'sku-a' at location 'default': requested 2, available 1"));
  auto unknown = CreateOrder({"ghost"});
  EXPECT_TRUE(IsError(unknown, absl::StatusCode::kNotFound, "sku 'ghost'"));
  EXPECT_THAT(Msg(unknown.status()), HasSubstr("items[0]"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(StoreSize(Table::kOrders), 0u);
  EXPECT_EQ(StoreSize(Table::kHolds), 0u);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
}

TEST_F(CoreTest, PayOrderCommitsHoldWithExactlyOneReceipt) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a", "sku-a"}, {}, "", 0, 19.99);
  ASSERT_OK(o);
  size_t before = EventCount();

  auto paid = Pay(o->order_id(), "psp-123");
  ASSERT_OK(paid);
  EXPECT_EQ(paid->order().status(), ord::ORDER_STATUS_PAID);
  EXPECT_EQ(paid->order().payment_reference(), "psp-123");
  EXPECT_EQ(Level("sku-a").on_hand(), 3);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(core_->GetReservation(o->reservation_id())->state(), inv::RESERVATION_STATE_COMMITTED);

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 3u);  // commit of one level, status PAID, receipt
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_COMMIT);
  EXPECT_EQ(events[0].stock_changed().delta_on_hand(), -2);
  EXPECT_EQ(events[1].order_status_changed().status(), ord::ORDER_STATUS_PAID);
  EXPECT_EQ(events[1].order_status_changed().previous_status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_EQ(events[2].type(), "order.receipt");
  EXPECT_EQ(events[2].key(), o->order_id());
  EXPECT_EQ(paid->sequence(), events[2].sequence());
  const auto& receipt = events[2].receipt();
  EXPECT_EQ(receipt.order_id(), o->order_id());
  EXPECT_EQ(receipt.customer_id(), "cust-1");
  EXPECT_DOUBLE_EQ(receipt.total_amount(), 19.99);
  EXPECT_EQ(receipt.payment_reference(), "psp-123");
  EXPECT_EQ(receipt.reservation_id(), o->reservation_id());
  ASSERT_EQ(receipt.lines_size(), 1);
  EXPECT_EQ(receipt.lines(0).quantity(), 2);

  EXPECT_TRUE(IsError(Pay(o->order_id()), absl::StatusCode::kFailedPrecondition,
                      "is PAID; only a CONFIRMED order can be paid"));
  int receipts = 0;
  for (const auto& e : Outbox()) receipts += e.has_receipt() ? 1 : 0;
  EXPECT_EQ(receipts, 1);
}

TEST_F(CoreTest, AdvanceOrderOneStepAtATime) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  const std::string id = o->order_id();
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_PACKING), absl::StatusCode::kFailedPrecondition,
                      "is CONFIRMED; it can move to PACKING only from PAID"));
  ASSERT_OK(Pay(id));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_DISPATCHED),
                      absl::StatusCode::kFailedPrecondition,
                      "is PAID; it can move to DISPATCHED only from PACKING"));
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_DELIVERED),
                      absl::StatusCode::kFailedPrecondition, "only from DISPATCHED"));
  EXPECT_EQ(EventCount(), before);

  auto packing = Advance(id, ord::ORDER_STATUS_PACKING);
  ASSERT_OK(packing);
  EXPECT_EQ(packing->order().status(), ord::ORDER_STATUS_PACKING);
  EXPECT_EQ(packing->order().details(), "order progressed to PACKING");
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_PACKING), absl::StatusCode::kFailedPrecondition,
                      "is PACKING"));
  auto dispatched = Advance(id, ord::ORDER_STATUS_DISPATCHED, "truck 7");
  ASSERT_OK(dispatched);
  EXPECT_EQ(dispatched->order().details(), "truck 7");
  auto delivered = Advance(id, ord::ORDER_STATUS_DELIVERED);
  ASSERT_OK(delivered);
  EXPECT_EQ(delivered->order().status(), ord::ORDER_STATUS_DELIVERED);
  EXPECT_TRUE(core::IsTerminal(delivered->order().status()));
  EXPECT_TRUE(IsError(Cancel(id), absl::StatusCode::kFailedPrecondition, "is DELIVERED"));

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 3u);  // one per transition
  const ord::OrderStatus expected[][2] = {
      {ord::ORDER_STATUS_PAID, ord::ORDER_STATUS_PACKING},
      {ord::ORDER_STATUS_PACKING, ord::ORDER_STATUS_DISPATCHED},
      {ord::ORDER_STATUS_DISPATCHED, ord::ORDER_STATUS_DELIVERED}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(events[i].order_status_changed().previous_status(), expected[i][0]);
    EXPECT_EQ(events[i].order_status_changed().status(), expected[i][1]);
    EXPECT_EQ(events[i].order_status_changed().status_name(),
              core::OrderStatusName(expected[i][1]));
  }
  EXPECT_EQ(events[1].order_status_changed().details(), "truck 7");
  EXPECT_EQ(core_->GetOrder(id)->status(), ord::ORDER_STATUS_DELIVERED);
  EXPECT_EQ(Level("sku-a").on_hand(), 4);
}

TEST_F(CoreTest, CancelConfirmedOrderReleasesHold) {
  ASSERT_OK(Adjust("sku-a", 5));
  ASSERT_OK(Adjust("sku-b", 5));
  auto o = CreateOrder({"sku-a", "sku-a", "sku-b"});
  ASSERT_OK(o);
  size_t before = EventCount();
  auto c = Cancel(o->order_id(), "changed mind");
  ASSERT_OK(c);
  EXPECT_EQ(c->order().status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_EQ(c->order().details(), "changed mind");
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 5);
  EXPECT_EQ(Level("sku-b").reserved(), 0);
  EXPECT_EQ(core_->GetReservation(o->reservation_id())->state(), inv::RESERVATION_STATE_RELEASED);
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RELEASE);
  EXPECT_EQ(events[1].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RELEASE);
  EXPECT_EQ(events[2].order_status_changed().status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_EQ(events[2].order_status_changed().previous_status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_TRUE(
      IsError(Cancel(o->order_id()), absl::StatusCode::kFailedPrecondition, "is CANCELLED"));
}

TEST_F(CoreTest, CancelPaidOrPackingOrderRestocksOnHand) {
  ASSERT_OK(Adjust("sku-a", 5));
  for (bool packing : {false, true}) {
    SCOPED_TRACE(packing ? "PACKING" : "PAID");
    auto o = CreateOrder({"sku-a", "sku-a"});
    ASSERT_OK(o);
    ASSERT_OK(Pay(o->order_id()));
    if (packing) ASSERT_OK(Advance(o->order_id(), ord::ORDER_STATUS_PACKING));
    EXPECT_EQ(Level("sku-a").on_hand(), 3);
    size_t before = EventCount();

    auto c = Cancel(o->order_id());
    ASSERT_OK(c);
    EXPECT_EQ(c->order().status(), ord::ORDER_STATUS_CANCELLED);
    EXPECT_EQ(c->order().details(), "cancelled by request");
    EXPECT_EQ(Level("sku-a").on_hand(), 5);
    EXPECT_EQ(Level("sku-a").reserved(), 0);
    auto events = EventsAfter(before);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RESTOCK);
    EXPECT_EQ(events[0].stock_changed().delta_on_hand(), 2);
    EXPECT_EQ(events[0].stock_changed().delta_reserved(), 0);
    EXPECT_EQ(events[0].stock_changed().order_id(), o->order_id());
    EXPECT_EQ(events[1].order_status_changed().status(), ord::ORDER_STATUS_CANCELLED);
    EXPECT_EQ(events[1].order_status_changed().previous_status(),
              packing ? ord::ORDER_STATUS_PACKING : ord::ORDER_STATUS_PAID);
  }
}

TEST_F(CoreTest, CancelDispatchedOrderIsRejected) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  ASSERT_OK(Pay(o->order_id()));
  ASSERT_OK(Advance(o->order_id(), ord::ORDER_STATUS_PACKING));
  ASSERT_OK(Advance(o->order_id(), ord::ORDER_STATUS_DISPATCHED));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Cancel(o->order_id()), absl::StatusCode::kFailedPrecondition,
                      "is DISPATCHED; only CONFIRMED, PAID or PACKING orders can be cancelled"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").on_hand(), 4);
  EXPECT_EQ(core_->GetOrder(o->order_id())->status(), ord::ORDER_STATUS_DISPATCHED);
}

TEST_F(CoreTest, OrderHoldChangesOnlyThroughOrderService) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Commit(o->reservation_id()), absl::StatusCode::kFailedPrecondition,
                      fmt::format("belongs to order '{}'; pay it", o->order_id())));
  EXPECT_TRUE(IsError(Release(o->reservation_id()), absl::StatusCode::kFailedPrecondition,
                      "cancel it with OrderService.CancelOrder"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").reserved(), 1);
  EXPECT_EQ(core_->GetOrder(o->order_id())->status(), ord::ORDER_STATUS_CONFIRMED);
}

TEST_F(CoreTest, UnknownOrderIsNotFound) {
  EXPECT_TRUE(IsError(Pay("ord-nope"), absl::StatusCode::kNotFound, "order 'ord-nope'"));
  EXPECT_TRUE(IsError(Advance("ord-nope", ord::ORDER_STATUS_PACKING), absl::StatusCode::kNotFound,
                      "order 'ord-nope'"));
  EXPECT_TRUE(IsError(Cancel("ord-nope"), absl::StatusCode::kNotFound, "order 'ord-nope'"));
  EXPECT_TRUE(
      IsError(core_->GetOrder("ord-nope"), absl::StatusCode::kNotFound, "order 'ord-nope'"));
}

}  // namespace
}  // namespace feed::core_test

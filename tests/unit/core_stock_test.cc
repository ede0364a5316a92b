// Unit tests of the core: AdjustStock, Reserve, Commit and Release, and GetStock reads.
// Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

TEST_F(CoreTest, AdjustDeltaCreatesLevelWithOneEvent) {
  auto r = Adjust("sku-1", 10);
  ASSERT_OK(r);
  EXPECT_FALSE(r->replayed());
  EXPECT_EQ(r->sequence(), 1u);
  const auto& l = r->level();
  EXPECT_EQ(l.sku(), "sku-1");
  EXPECT_EQ(l.location(), "default");
  EXPECT_EQ(l.on_hand(), 10);
  EXPECT_EQ(l.reserved(), 0);
  EXPECT_EQ(l.available(), 10);
  EXPECT_EQ(l.version(), 1u);
  EXPECT_EQ(l.sequence(), 1u);
  EXPECT_EQ(l.updated_at_ms(), kStart);
  EXPECT_FALSE(l.allow_backorder());
  EXPECT_TRUE(ProtoEq(Level("sku-1"), l));

  auto events = Outbox();
  ASSERT_EQ(events.size(), 1u);
  const auto& e = events[0];
  EXPECT_EQ(e.type(), "inventory.stock.changed");
  EXPECT_EQ(e.key(), "sku-1");
  EXPECT_EQ(e.sequence(), 1u);
  EXPECT_EQ(e.occurred_at().seconds(), kStart / 1000);
  ASSERT_TRUE(e.has_stock_changed());
  EXPECT_EQ(e.stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_ADJUST);
  EXPECT_EQ(e.stock_changed().delta_on_hand(), 10);
  EXPECT_EQ(e.stock_changed().delta_reserved(), 0);
  EXPECT_EQ(e.stock_changed().reason(), "test");
  EXPECT_TRUE(ProtoEq(e.stock_changed().level(), l));
}

TEST_F(CoreTest, AdjustSetAndNegativeDelta) {
  ASSERT_OK(Adjust("sku-1", 10));
  auto set = Adjust("sku-1", 4, inv::ADJUST_MODE_SET);
  ASSERT_OK(set);
  EXPECT_EQ(set->level().on_hand(), 4);
  EXPECT_EQ(set->level().version(), 2u);
  EXPECT_EQ(Outbox().back().stock_changed().delta_on_hand(), -6);

  auto minus = Adjust("sku-1", -3);
  ASSERT_OK(minus);
  EXPECT_EQ(minus->level().on_hand(), 1);
  EXPECT_EQ(EventCount(), 3u);

  // SET to the same value is still a change of the level (version, event).
  auto same = Adjust("sku-1", 1, inv::ADJUST_MODE_SET);
  ASSERT_OK(same);
  EXPECT_EQ(same->level().version(), 4u);
  EXPECT_EQ(EventCount(), 4u);
}

TEST_F(CoreTest, AdjustRejectsNegativeOnHand) {
  ASSERT_OK(Adjust("sku-1", 1));
  auto r = Adjust("sku-1", -2);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "on_hand of sku 'sku-1'"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("negative"));
  EXPECT_EQ(Level("sku-1").on_hand(), 1);
  EXPECT_EQ(Level("sku-1").version(), 1u);
  EXPECT_EQ(EventCount(), 1u);

  // A negative delta on a level that does not exist creates nothing.
  EXPECT_TRUE(IsError(Adjust("sku-new", -5), absl::StatusCode::kFailedPrecondition, "negative"));
  EXPECT_FALSE(HasLevel("sku-new"));
  // SET below zero is invalid input, not a precondition.
  EXPECT_TRUE(IsError(Adjust("sku-1", -1, inv::ADJUST_MODE_SET), absl::StatusCode::kInvalidArgument,
                      "quantity"));
  EXPECT_EQ(EventCount(), 1u);
}

TEST_F(CoreTest, AdjustBelowReservedRejectedUnlessBackorder) {
  ASSERT_OK(Adjust("sku-1", 10));
  ASSERT_OK(Reserve({{"sku-1", 6}}));
  size_t events = EventCount();

  EXPECT_TRUE(IsError(Adjust("sku-1", 5, inv::ADJUST_MODE_SET),
                      absl::StatusCode::kFailedPrecondition, "negative available"));
  EXPECT_TRUE(
      IsError(Adjust("sku-1", -5), absl::StatusCode::kFailedPrecondition, "on_hand 5, reserved 6"));
  EXPECT_EQ(EventCount(), events);
  EXPECT_EQ(Level("sku-1").on_hand(), 10);

  // Allowing backorder in the same request lets on_hand go below reserved.
  inv::AdjustStockRequest r;
  r.set_sku("sku-1");
  r.set_mode(inv::ADJUST_MODE_SET);
  r.set_quantity(4);
  r.set_allow_backorder(true);
  auto ok = Adjust(r);
  ASSERT_OK(ok);
  EXPECT_EQ(ok->level().on_hand(), 4);
  EXPECT_EQ(ok->level().reserved(), 6);
  EXPECT_EQ(ok->level().available(), -2);
  EXPECT_TRUE(ok->level().allow_backorder());
  EXPECT_EQ(EventCount(), events + 1);

  // Turning backorder off while available is negative is refused.
  inv::AdjustStockRequest off;
  off.set_sku("sku-1");
  off.set_mode(inv::ADJUST_MODE_DELTA);
  off.set_quantity(0);
  off.set_allow_backorder(false);
  EXPECT_TRUE(IsError(Adjust(off), absl::StatusCode::kFailedPrecondition, "negative available"));
  EXPECT_TRUE(Level("sku-1").allow_backorder());
}

TEST_F(CoreTest, BackorderAllowsReservingBeyondOnHand) {
  inv::AdjustStockRequest r;
  r.set_sku("pre-order");
  r.set_mode(inv::ADJUST_MODE_DELTA);
  r.set_quantity(0);  // only the policy changes: allowed with allow_backorder set
  r.set_allow_backorder(true);
  auto created = Adjust(r);
  ASSERT_OK(created);
  EXPECT_EQ(created->level().on_hand(), 0);
  EXPECT_TRUE(created->level().allow_backorder());

  auto hold = Reserve({{"pre-order", 5}});
  ASSERT_OK(hold);
  EXPECT_EQ(hold->levels(0).available(), -5);
  auto more = Reserve({{"pre-order", 3}});
  ASSERT_OK(more);
  EXPECT_EQ(more->levels(0).available(), -8);
  EXPECT_EQ(Level("pre-order").reserved(), 8);
  // on_hand itself never goes negative: a backordered hold cannot be committed before the
  // stock arrives (FAILED_PRECONDITION, nothing changes)...
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Commit(hold->reservation().reservation_id()),
                      absl::StatusCode::kFailedPrecondition, "cannot be committed yet"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("pre-order").on_hand(), 0);
  // ...restock, then commit.
  ASSERT_OK(Adjust("pre-order", 10));
  ASSERT_OK(Commit(hold->reservation().reservation_id()));
  EXPECT_EQ(Level("pre-order").on_hand(), 5);
  EXPECT_EQ(Level("pre-order").reserved(), 3);
}

TEST_F(CoreTest, ReserveReturnsHeldReservationAndLevels) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 5, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  size_t before = EventCount();

  auto r = Reserve({{"sku-a", 3}, {"sku-b", 2, "wh-2"}});
  ASSERT_OK(r);
  const auto& res = r->reservation();
  EXPECT_THAT(res.reservation_id(), StartsWith("rsv-"));
  EXPECT_EQ(res.state(), inv::RESERVATION_STATE_HELD);
  EXPECT_EQ(res.created_at_ms(), kStart);
  EXPECT_EQ(res.expires_at_ms(), kStart + kDefaultTtl);
  EXPECT_FALSE(res.owned_by_order());
  ASSERT_EQ(res.lines_size(), 2);
  EXPECT_EQ(res.lines(0).sku(), "sku-a");
  EXPECT_EQ(res.lines(0).location(), "default");
  EXPECT_EQ(res.lines(0).quantity(), 3);
  EXPECT_EQ(res.lines(1).sku(), "sku-b");
  EXPECT_EQ(res.lines(1).location(), "wh-2");
  EXPECT_EQ(res.lines(1).quantity(), 2);

  ASSERT_EQ(r->levels_size(), 2);
  EXPECT_EQ(r->levels(0).sku(), "sku-a");
  EXPECT_EQ(r->levels(0).on_hand(), 10);
  EXPECT_EQ(r->levels(0).reserved(), 3);
  EXPECT_EQ(r->levels(0).available(), 7);
  EXPECT_EQ(r->levels(0).version(), 2u);
  EXPECT_EQ(r->levels(1).sku(), "sku-b");
  EXPECT_EQ(r->levels(1).reserved(), 2);
  EXPECT_EQ(r->levels(1).available(), 3);
  EXPECT_TRUE(ProtoEq(Level("sku-a"), r->levels(0)));
  EXPECT_TRUE(ProtoEq(Level("sku-b", "wh-2"), r->levels(1)));

  // One event per affected level; the response's sequence is the last of them.
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(r->sequence(), events.back().sequence());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RESERVE);
    EXPECT_EQ(events[i].stock_changed().reservation_id(), res.reservation_id());
    EXPECT_EQ(events[i].stock_changed().delta_on_hand(), 0);
    EXPECT_TRUE(ProtoEq(events[i].stock_changed().level(), r->levels(static_cast<int>(i))));
  }
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), 3);
  EXPECT_EQ(events[1].stock_changed().delta_reserved(), 2);

  auto got = core_->GetReservation(res.reservation_id());
  ASSERT_OK(got);
  EXPECT_TRUE(ProtoEq(*got, res));

  auto ttl = Reserve({{"sku-a", 1}}, "", "", 60'000);
  ASSERT_OK(ttl);
  EXPECT_EQ(ttl->reservation().expires_at_ms(), kStart + 60'000);
}

TEST_F(CoreTest, ReserveSumsDuplicateLines) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 10));
  size_t before = EventCount();
  auto r = Reserve({{"sku-a", 2}, {"sku-b", 1}, {"sku-a", 3, "default"}});
  ASSERT_OK(r);
  ASSERT_EQ(r->reservation().lines_size(), 2);
  EXPECT_EQ(r->reservation().lines(0).sku(), "sku-a");
  EXPECT_EQ(r->reservation().lines(0).quantity(), 5);
  EXPECT_EQ(r->reservation().lines(1).sku(), "sku-b");
  EXPECT_EQ(r->reservation().lines(1).quantity(), 1);
  ASSERT_EQ(r->levels_size(), 2);
  EXPECT_EQ(Level("sku-a").reserved(), 5);
  EXPECT_EQ(Level("sku-a").version(), 2u);  // one change, not two
  EXPECT_EQ(EventCount(), before + 2);

  // The summed quantity is what must be available.
  EXPECT_TRUE(IsError(Reserve({{"sku-b", 5}, {"sku-b", 5}}), absl::StatusCode::kFailedPrecondition,
                      "requested 10, available 9"));
}

TEST_F(CoreTest, ReserveIsAllOrNothing) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 1));
  size_t before = EventCount();
  size_t commits = store_.commits();

  auto r = Reserve({{"sku-a", 5}, {"sku-b", 2}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "sku 'sku-b'"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("available 1"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("requested 2"));

  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").version(), 1u);
  EXPECT_EQ(Level("sku-b").reserved(), 0);
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(store_.commits(), commits);  // nothing at all was written
  EXPECT_EQ(StoreSize(Table::kHolds), 0u);
  EXPECT_EQ(core_->stats().held_reservations, 0u);
}

TEST_F(CoreTest, InsufficientStockNamesSkuAndAvailable) {
  ASSERT_OK(Adjust("sku-a", 7));
  ASSERT_OK(Reserve({{"sku-a", 3}}));
  auto r = Reserve({{"sku-a", 5}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition,
                      "insufficient stock for sku 'sku-a' at location 'default': requested 5, "
                      "available 4"));
}

TEST_F(CoreTest, ReserveUnknownSkuIsNotFound) {
  ASSERT_OK(Adjust("sku-a", 10));
  size_t before = EventCount();
  auto r = Reserve({{"sku-a", 1}, {"ghost", 1}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kNotFound, "sku 'ghost'"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("lines[1]"));
  EXPECT_TRUE(
      IsError(Reserve({{"sku-a", 1, "wh-9"}}), absl::StatusCode::kNotFound, "location 'wh-9'"));
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(EventCount(), before);
}

TEST_F(CoreTest, NotFoundNamesTheRequestLineIndex) {
  // Duplicate lines are summed before the stock check; the error must still name the line
  // of the request, not the index in the summed list.
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 1}, {"sku-a", 1}, {"ghost", 1}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kNotFound, "lines[2]"));
}

TEST_F(CoreTest, ClientChosenReservationIdReusedIsAlreadyExists) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 1}}, "cart-42");
  ASSERT_OK(r);
  EXPECT_EQ(r->reservation().reservation_id(), "cart-42");
  size_t before = EventCount();

  EXPECT_TRUE(IsError(Reserve({{"sku-a", 1}}, "cart-42"), absl::StatusCode::kAlreadyExists,
                      "reservation_id 'cart-42' already exists"));
  ASSERT_OK(Commit("cart-42"));
  before = EventCount();
  // Closed reservations keep their id too.
  EXPECT_TRUE(
      IsError(Reserve({{"sku-a", 1}}, "cart-42"), absl::StatusCode::kAlreadyExists, "cart-42"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 9);
}

TEST_F(CoreTest, GeneratedIdsNeverCollideWithClientChosenIds) {
  // Generated ids are "rsv-<store id prefix>-<sequence>"; clients may not use the "rsv-"
  // prefix, so a later generated hold can never overwrite a client's hold.
  ASSERT_OK(Adjust("sku-a", 100));
  auto first = Reserve({{"sku-a", 1}});
  ASSERT_OK(first);
  std::string prefix = first->reservation().reservation_id();
  prefix = prefix.substr(0, prefix.rfind('-') + 1);  // "rsv-xxxxxx-"
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 2}}, fmt::format("{}{}", prefix, 4)),
                      absl::StatusCode::kInvalidArgument, "reservation_id"));
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 2}}, "rsv-mine"), absl::StatusCode::kInvalidArgument,
                      "reserved for ids the server generates"));
  EXPECT_EQ(EventCount(), before);
  // A client id without the prefix is fine, and generated ids keep coming.
  ASSERT_OK(Reserve({{"sku-a", 2}}, "cart-7"));
  auto generated = Reserve({{"sku-a", 4}});
  ASSERT_OK(generated);
  auto order = CreateOrder({"sku-a"});
  ASSERT_OK(order);
  EXPECT_NE(order->reservation_id(), generated->reservation().reservation_id());
  EXPECT_EQ(Level("sku-a").reserved(), 1 + 2 + 4 + 1);
  EXPECT_EQ(StoreSize(Table::kHolds), 4u);
  Reopen();
  EXPECT_EQ(Level("sku-a").reserved(), 8);
}

TEST_F(CoreTest, CommitDeductsOnHandAndReserved) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 10));
  auto r = Reserve({{"sku-a", 3}, {"sku-b", 2}});
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  size_t before = EventCount();
  clock_.Advance(500);

  auto c = Commit(id);
  ASSERT_OK(c);
  EXPECT_FALSE(c->replayed());
  EXPECT_EQ(c->reservation().state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(c->reservation().closed_at_ms(), kStart + 500);
  ASSERT_EQ(c->levels_size(), 2);
  EXPECT_EQ(c->levels(0).on_hand(), 7);
  EXPECT_EQ(c->levels(0).reserved(), 0);
  EXPECT_EQ(c->levels(0).available(), 7);
  EXPECT_EQ(c->levels(1).on_hand(), 8);
  EXPECT_TRUE(ProtoEq(Level("sku-a"), c->levels(0)));

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(c->sequence(), events.back().sequence());
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_COMMIT);
  EXPECT_EQ(events[0].stock_changed().delta_on_hand(), -3);
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), -3);
  EXPECT_EQ(events[0].stock_changed().reservation_id(), id);

  auto got = core_->GetReservation(id);
  ASSERT_OK(got);
  EXPECT_EQ(got->state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(StoreSize(Table::kHolds), 0u);
  EXPECT_EQ(StoreSize(Table::kReservations), 1u);
}

TEST_F(CoreTest, CommitTwiceAndReleaseAfterCommitAreRejected) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 3}});
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  ASSERT_OK(Commit(id));
  size_t before = EventCount();

  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition,
                      fmt::format("reservation '{}' is already COMMITTED", id)));
  EXPECT_TRUE(IsError(Release(id), absl::StatusCode::kFailedPrecondition, "already COMMITTED"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").on_hand(), 7);
}

TEST_F(CoreTest, CommitOrReleaseUnknownReservationIsNotFound) {
  EXPECT_TRUE(IsError(Commit("nope"), absl::StatusCode::kNotFound, "reservation 'nope'"));
  EXPECT_TRUE(IsError(Release("nope"), absl::StatusCode::kNotFound, "reservation 'nope'"));
  EXPECT_TRUE(
      IsError(core_->GetReservation("nope"), absl::StatusCode::kNotFound, "reservation 'nope'"));
}

TEST_F(CoreTest, ReleaseReturnsStockToAvailable) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 3}});
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  size_t before = EventCount();

  auto rel = Release(id, "customer left");
  ASSERT_OK(rel);
  EXPECT_EQ(rel->reservation().state(), inv::RESERVATION_STATE_RELEASED);
  EXPECT_EQ(rel->reservation().close_reason(), "customer left");
  ASSERT_EQ(rel->levels_size(), 1);
  EXPECT_EQ(rel->levels(0).on_hand(), 10);
  EXPECT_EQ(rel->levels(0).reserved(), 0);
  EXPECT_EQ(rel->levels(0).available(), 10);
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RELEASE);
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), -3);
  EXPECT_EQ(events[0].stock_changed().delta_on_hand(), 0);
  EXPECT_EQ(events[0].stock_changed().reason(), "customer left");

  EXPECT_TRUE(IsError(Release(id), absl::StatusCode::kFailedPrecondition, "already RELEASED"));
  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition, "already RELEASED"));
  EXPECT_EQ(core_->GetReservation(id)->state(), inv::RESERVATION_STATE_RELEASED);
}

TEST_F(CoreTest, GetStockManyKeysEveryLocationAndMissing) {
  ASSERT_OK(Adjust("a", 1));
  ASSERT_OK(Adjust("a", 2, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  ASSERT_OK(Adjust("ab", 3));  // shares a prefix with "a": must not show up for "a"
  ASSERT_OK(Adjust("b", 4));

  inv::GetStockRequest req;
  auto add = [&](std::string sku, std::string loc) {
    auto* k = req.add_keys();
    k->set_sku(std::move(sku));
    k->set_location(std::move(loc));
  };
  add("a", "");
  add("b", "default");
  add("ghost", "");
  add("b", "wh-9");
  add("ab", "");
  auto resp = core_->GetStock(req);
  ASSERT_OK(resp);
  ASSERT_EQ(resp->levels_size(), 4);
  EXPECT_EQ(resp->levels(0).sku(), "a");
  EXPECT_EQ(resp->levels(0).location(), "default");
  EXPECT_EQ(resp->levels(0).on_hand(), 1);
  EXPECT_EQ(resp->levels(1).sku(), "a");
  EXPECT_EQ(resp->levels(1).location(), "wh-2");
  EXPECT_EQ(resp->levels(1).on_hand(), 2);
  EXPECT_EQ(resp->levels(2).sku(), "b");
  EXPECT_EQ(resp->levels(2).on_hand(), 4);
  EXPECT_EQ(resp->levels(3).sku(), "ab");
  EXPECT_EQ(resp->levels(3).on_hand(), 3);
  ASSERT_EQ(resp->missing_size(), 2);
  EXPECT_EQ(resp->missing(0).sku(), "ghost");
  EXPECT_EQ(resp->missing(0).location(), "");
  EXPECT_EQ(resp->missing(1).sku(), "b");
  EXPECT_EQ(resp->missing(1).location(), "wh-9");
}

}  // namespace
}  // namespace feed::core_test

namespace feed::core_test {
namespace {

inv::AdjustStockRequest AdjustReq(const std::string& sku, int64_t quantity, inv::AdjustMode mode,
                                  const std::string& key = "") {
  inv::AdjustStockRequest r;
  r.set_sku(sku);
  r.set_mode(mode);
  r.set_quantity(quantity);
  r.set_reason("batch test");
  r.set_idempotency_key(key);
  return r;
}

TEST_F(CoreTest, BatchAdjustAppliesEachAdjustmentOnItsOwnInOrder) {
  ASSERT_OK(Adjust("sku-a", 5));
  inv::BatchAdjustStockRequest batch;
  *batch.add_adjustments() = AdjustReq("sku-a", 10, inv::ADJUST_MODE_SET, "b-1");
  *batch.add_adjustments() = AdjustReq("sku-b", 0, inv::ADJUST_MODE_DELTA);   // invalid: 0
  *batch.add_adjustments() = AdjustReq("sku-c", -1, inv::ADJUST_MODE_DELTA);  // refused: < 0
  *batch.add_adjustments() = AdjustReq("sku-a", 2, inv::ADJUST_MODE_DELTA, "b-2");
  *batch.add_adjustments() = AdjustReq("sku a", 1, inv::ADJUST_MODE_DELTA);  // invalid sku
  const size_t events = EventCount();
  auto r = CallSync(*core_, &InventoryCore::BatchAdjustStock, batch);
  ASSERT_OK(r);
  ASSERT_EQ(r->results_size(), 5);
  EXPECT_EQ(r->results(0).code(), 0);
  EXPECT_EQ(r->results(0).response().level().on_hand(), 10);
  EXPECT_EQ(r->results(1).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r->results(1).message(), StartsWith("adjustments[1].quantity: "));
  EXPECT_EQ(r->results(2).code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(r->results(2).message(), StartsWith("adjustments[2]: adjustment would make"));
  EXPECT_EQ(r->results(3).code(), 0);
  EXPECT_EQ(r->results(3).response().level().on_hand(), 12);  // after item 0, in order
  EXPECT_EQ(r->results(4).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r->results(4).message(), StartsWith("adjustments[4].sku: "));
  EXPECT_EQ(EventCount(), events + 2);  // one per applied adjustment, nothing for the others
  EXPECT_FALSE(HasLevel("sku-c"));

  // The same batch again: the keyed adjustments replay, the unkeyed refused ones stay refused.
  auto again = CallSync(*core_, &InventoryCore::BatchAdjustStock, batch);
  ASSERT_OK(again);
  EXPECT_TRUE(again->results(0).response().replayed());
  EXPECT_TRUE(again->results(3).response().replayed());
  EXPECT_EQ(again->results(3).response().level().on_hand(), 12);
  EXPECT_EQ(Level("sku-a").on_hand(), 12);
  // A batch's key is an AdjustStock key: the single call replays it too.
  auto single = Adjust(batch.adjustments(3));
  ASSERT_OK(single);
  EXPECT_TRUE(single->replayed());
  // ...and the same key with a different request is refused, as for two single calls.
  auto other = AdjustReq("sku-a", 3, inv::ADJUST_MODE_DELTA, "b-2");
  EXPECT_TRUE(IsError(Adjust(other), absl::StatusCode::kAlreadyExists, "idempotency_key 'b-2'"));
}

TEST_F(CoreTest, BatchAdjustRefusesAnEmptyOrOversizedBatchWhole) {
  inv::BatchAdjustStockRequest empty;
  EXPECT_TRUE(IsError(CallSync(*core_, &InventoryCore::BatchAdjustStock, empty),
                      absl::StatusCode::kInvalidArgument, "adjustments: 0 given"));
  inv::BatchAdjustStockRequest big;
  for (size_t i = 0; i <= options_.limits.max_batch_adjustments; ++i) {
    *big.add_adjustments() = AdjustReq(fmt::format("sku-{}", i), 1, inv::ADJUST_MODE_DELTA);
  }
  EXPECT_TRUE(IsError(CallSync(*core_, &InventoryCore::BatchAdjustStock, big),
                      absl::StatusCode::kInvalidArgument, "a batch holds 1 to 1000"));
  EXPECT_EQ(EventCount(), 0u);
}

}  // namespace
}  // namespace feed::core_test

namespace feed::core_test {
namespace {

TEST_F(CoreTest, GetStockAsOfASequenceRewindsWithTheKeptEvents) {
  auto a = Adjust("sku-a", 10);  // 1
  ASSERT_OK(a);
  auto r = Reserve({{"sku-a", 3}}, "r-1");  // 2
  ASSERT_OK(r);
  ASSERT_OK(Adjust("sku-b", 5));  // 3: sku-b is created
  auto c = Commit("r-1");         // 4
  ASSERT_OK(c);
  ASSERT_EQ(c->sequence(), 4u);
  WaitPublished(4);
  auto as_of = [&](uint64_t seq) {
    inv::GetStockRequest req;
    req.add_sku("sku-a");
    req.add_sku("sku-b");
    req.set_as_of_sequence(seq);
    return core_->GetStock(req);
  };
  auto at2 = as_of(2);
  ASSERT_OK(at2);
  EXPECT_EQ(at2->as_of_sequence(), 2u);
  ASSERT_EQ(at2->levels_size(), 1);
  EXPECT_EQ(at2->levels(0).sku(), "sku-a");
  EXPECT_EQ(at2->levels(0).on_hand(), 10);
  EXPECT_EQ(at2->levels(0).reserved(), 3);
  EXPECT_EQ(at2->levels(0).available(), 7);
  ASSERT_EQ(at2->missing_size(), 1);  // sku-b did not exist yet
  EXPECT_EQ(at2->missing(0).sku(), "sku-b");
  auto at1 = as_of(1);
  ASSERT_OK(at1);
  EXPECT_EQ(at1->levels(0).reserved(), 0);
  EXPECT_EQ(at1->levels(0).version(), 1u);
  auto now = as_of(4);  // the same as without as_of
  ASSERT_OK(now);
  EXPECT_EQ(now->levels_size(), 2);
  EXPECT_EQ(now->levels(0).on_hand(), 7);
  EXPECT_TRUE(
      IsError(as_of(9), absl::StatusCode::kOutOfRange, "after the last committed sequence 4"));

  // Once the journal is trimmed (delivered and checkpointed, no retention), only what
  // follows the oldest kept event can be answered.
  StoreRecord(Table::kMeta, storage::meta_keys::kRelayCursor, storage::EncodeSequence(5));
  ASSERT_OK(core_->Checkpoint());
  ASSERT_OK(Adjust("sku-a", 1));  // 5
  WaitPublished(5);
  EXPECT_TRUE(IsError(as_of(2), absl::StatusCode::kOutOfRange,
                      "as_of_sequence: 2 is older than the events kept; the oldest that can be "
                      "answered is 4"));
  auto at4 = as_of(4);
  ASSERT_OK(at4);
  EXPECT_EQ(at4->levels(0).on_hand(), 7);
  check_invariants_ = false;  // the relay cursor is set by hand
}

}  // namespace
}  // namespace feed::core_test

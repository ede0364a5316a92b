// The stream rules of the core without a network: StockSubscription (WatchStock),
// FeedSession (Feed) and OrderSubscription (StreamOrderUpdates). Live events are built by
// hand so that every interleaving of attach, snapshot and publication can be set up; the
// snapshots and leases use a real InventoryCore on a MemoryStore.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/feed_session.h"
#include "core/inventory_core.h"
#include "core/order_subscription.h"
#include "core/stock_subscription.h"
#include "events/v1/events.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"

namespace feed::core {
namespace {

namespace inv = ::inventory::v1;
namespace ord = ::order::v1;
using ::testing::HasSubstr;

EventPtr StockEvent(uint64_t sequence, const std::string& sku, uint64_t version,
                    int64_t on_hand = 1, const std::string& location = "default") {
  auto e = std::make_shared<events::v1::Event>();
  e->set_sequence(sequence);
  e->set_key(sku);
  auto* level = e->mutable_stock_changed()->mutable_level();
  level->set_sku(sku);
  level->set_location(location);
  level->set_on_hand(on_hand);
  level->set_available(on_hand);
  level->set_version(version);
  level->set_sequence(sequence);
  return e;
}

EventPtr OrderEvent(uint64_t sequence, const std::string& order_id, ord::OrderStatus status) {
  auto e = std::make_shared<events::v1::Event>();
  e->set_sequence(sequence);
  e->set_key(order_id);
  auto* change = e->mutable_order_status_changed();
  change->set_order_id(order_id);
  change->set_status(status);
  change->set_status_name(std::string(OrderStatusName(status)));
  return e;
}

class SubscriptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoreOptions options;
    options.sweep_interval_ms = 0;
    auto core = InventoryCore::Open(store_, clock_, options);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }
  void TearDown() override { core_->Shutdown(); }

  uint64_t Set(const std::string& sku, int64_t quantity) {
    inv::AdjustStockRequest a;
    a.set_sku(sku);
    a.set_mode(inv::ADJUST_MODE_SET);
    a.set_quantity(quantity);
    auto r = CallSync(*core_, &InventoryCore::AdjustStock, a);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sequence() : 0;
  }

  static inv::WatchStockRequest Watch(const std::vector<std::string>& skus, uint64_t resume = 0,
                                      bool snapshot_on_gap = false) {
    inv::WatchStockRequest req;
    for (const auto& s : skus) req.add_keys()->set_sku(s);
    req.set_resume_after_sequence(resume);
    req.set_snapshot_on_gap(snapshot_on_gap);
    return req;
  }

  // Everything Next has ready now.
  static std::vector<inv::StockUpdate> Drain(StockSubscription& sub) {
    std::vector<inv::StockUpdate> out;
    while (true) {
      auto next = sub.Next();
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok() || !next->has_value()) return out;
      out.push_back(std::move(**next));
    }
  }
  static std::vector<inv::StockUpdate> Drain(FeedSession& session) {
    std::vector<inv::StockUpdate> out;
    while (auto u = session.NextUpdate()) out.push_back(std::move(*u));
    return out;
  }

  storage::MemoryStore store_;
  FakeClock clock_;
  std::unique_ptr<InventoryCore> core_;
};

// --- StockSubscription ------------------------------------------------------------------

TEST_F(SubscriptionTest, AResumeReplaysEveryRetainedChangeOneByOneThenLiveOnes) {
  StockSubscription sub(*core_, Watch({"a", "b"}, 10), QueueLimits{2, 100});
  ASSERT_TRUE(sub.Validate().ok());
  EXPECT_EQ(sub.attach_after(), 10u);
  ChangeFeed::Attach attach;
  attach.last_sequence = 15;
  for (uint64_t s = 11; s <= 15; ++s) {
    attach.replay.push_back(StockEvent(s, s % 2 ? "a" : "b", s));
  }
  attach.replay.push_back(StockEvent(16, "other", 1));  // not watched
  ASSERT_TRUE(sub.Start(attach).ok());
  // Live events wait behind the replay; the reader is not behind, so nothing is merged.
  ASSERT_TRUE(sub.Offer({StockEvent(17, "a", 17), StockEvent(18, "a", 18)}).ok());
  auto all = Drain(sub);
  ASSERT_EQ(all.size(), 7u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].kind(), inv::StockUpdate::KIND_CHANGE);
    EXPECT_FALSE(all[i].conflated());
    EXPECT_EQ(all[i].sequence(), i < 5 ? 11 + i : 12 + i);
  }
}

TEST_F(SubscriptionTest, EventsOfferedBeforeStartWaitAndThoseTheClientHasAreDropped) {
  StockSubscription sub(*core_, Watch({"a"}, 20), QueueLimits{100, 100});
  // Published between the attachment and Start, and newer than the feed's last sequence
  // at attach time; 20 and 19 the client already has.
  ASSERT_TRUE(
      sub.Offer({StockEvent(19, "a", 19), StockEvent(20, "a", 20), StockEvent(21, "a", 21)}).ok());
  EXPECT_FALSE(sub.Next()->has_value()) << "an update left before Start";
  ChangeFeed::Attach attach;
  attach.last_sequence = 18;
  ASSERT_TRUE(sub.Start(attach).ok());
  auto all = Drain(sub);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].sequence(), 21u);
}

TEST_F(SubscriptionTest, AGapEndsWithOutOfRangeOrRestartsWithASnapshot) {
  Set("g", 3);
  ChangeFeed::Attach gap;
  gap.gap = true;
  gap.oldest_retained = 40;
  StockSubscription strict(*core_, Watch({"g"}, 5), QueueLimits{100, 100});
  absl::Status s = strict.Start(gap);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(s.message()), HasSubstr("oldest retained: 40"));

  StockSubscription lenient(*core_, Watch({"g"}, 5, true), QueueLimits{100, 100});
  ASSERT_TRUE(lenient.Start(gap).ok());
  auto all = Drain(lenient);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].kind(), inv::StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(all[0].level().on_hand(), 3);
  EXPECT_EQ(all[1].kind(), inv::StockUpdate::KIND_SNAPSHOT_END);
}

TEST_F(SubscriptionTest, ASnapshotIsACutThatLiveChangesFollowInOrder) {
  Set("a", 1);
  const uint64_t cut = Set("b", 2);
  StockSubscription sub(*core_, Watch({"a", "b"}), QueueLimits{100, 100});
  // A change already in the snapshot arrives live before Start; one after the cut too.
  ASSERT_TRUE(sub.Offer({StockEvent(cut, "b", 1, 2)}).ok());
  ASSERT_TRUE(sub.Start(ChangeFeed::Attach{}).ok());
  ASSERT_TRUE(sub.Offer({StockEvent(cut, "b", 1, 2), StockEvent(cut + 1, "a", 2, 5)}).ok());
  auto all = Drain(sub);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].kind(), inv::StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(all[1].kind(), inv::StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(all[0].sequence(), cut);
  EXPECT_EQ(all[2].kind(), inv::StockUpdate::KIND_SNAPSHOT_END);
  EXPECT_EQ(all[2].sequence(), cut);
  EXPECT_EQ(all[3].kind(), inv::StockUpdate::KIND_CHANGE);
  EXPECT_EQ(all[3].sequence(), cut + 1);
}

TEST_F(SubscriptionTest, AReaderBehindGetsMergedUpdatesInOrderAndIsEndedPastTheLimit) {
  StockSubscription sub(*core_, Watch({}, 1), QueueLimits{3, 5});
  ASSERT_TRUE(sub.Start(ChangeFeed::Attach{}).ok());
  std::vector<EventPtr> burst;
  for (uint64_t s = 2; s <= 41; ++s)
    burst.push_back(StockEvent(s, "hot-" + std::to_string(s % 4), s));
  ASSERT_TRUE(sub.Offer(burst).ok());
  EXPECT_GT(sub.conflated(), 0u);
  auto all = Drain(sub);
  EXPECT_LE(all.size(), 5u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GT(all[i].sequence(), all[i - 1].sequence());
  EXPECT_EQ(all.back().sequence(), 41u);

  std::vector<EventPtr> wide;
  for (uint64_t s = 42; s <= 50; ++s) wide.push_back(StockEvent(s, "sku-" + std::to_string(s), 1));
  absl::Status over = sub.Offer(wide);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.message()), HasSubstr("reader too slow"));
}

TEST_F(SubscriptionTest, OnlyWatchedLevelsAreOfferedAndAnEmptyFilterWatchesAll) {
  inv::WatchStockRequest req = Watch({}, 1);
  auto* exact = req.add_keys();
  exact->set_sku("x");
  exact->set_location("north");
  StockSubscription sub(*core_, req, QueueLimits{100, 100});
  EXPECT_EQ(sub.delivery_keys(), std::vector<std::string>{"x"});
  ASSERT_TRUE(sub.Start(ChangeFeed::Attach{}).ok());
  ASSERT_TRUE(sub.Offer({StockEvent(2, "x", 1, 1, "south"), StockEvent(3, "x", 1, 1, "north"),
                         StockEvent(4, "y", 1)})
                  .ok());
  auto all = Drain(sub);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].sequence(), 3u);

  StockSubscription everything(*core_, Watch({}, 1), QueueLimits{100, 100});
  EXPECT_TRUE(everything.delivery_keys().empty());
  ASSERT_TRUE(everything.Start(ChangeFeed::Attach{}).ok());
  ASSERT_TRUE(everything.Offer({StockEvent(2, "x", 1), StockEvent(3, "y", 1)}).ok());
  EXPECT_EQ(Drain(everything).size(), 2u);
}

TEST_F(SubscriptionTest, InvalidKeysAreRefusedNamingTheField) {
  StockSubscription sub(*core_, Watch({"bad sku!"}), QueueLimits{100, 100});
  absl::Status s = sub.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("keys[0].sku"));
}

// --- FeedSession ----------------------------------------------------------------------

inv::FeedSubscribe Subscribe(const std::vector<std::string>& skus, bool snapshot) {
  inv::FeedSubscribe s;
  for (const auto& sku : skus) s.add_keys()->set_sku(sku);
  s.set_snapshot(snapshot);
  return s;
}

TEST_F(SubscriptionTest, AFeedGetsTheChangesOfItsSubscribedKeysOnly) {
  FeedSession session(*core_, QueueLimits{100, 100});
  ChangeFeed::Attach attach;
  attach.last_sequence = 1;
  session.Attached(attach);
  auto sub = session.BeginSubscribe(Subscribe({"a"}, false));
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_TRUE(session.CompleteSubscribe(*sub, FeedSession::SnapshotRows{}).ok());
  EXPECT_EQ(session.subscriptions(), 1u);
  ASSERT_TRUE(
      session.Offer({StockEvent(2, "a", 1), StockEvent(3, "b", 1), StockEvent(4, "a", 2)}).ok());
  auto all = Drain(session);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].sequence(), 2u);
  EXPECT_EQ(all[1].sequence(), 4u);

  inv::FeedUnsubscribe unsub;
  unsub.add_keys()->set_sku("a");
  session.Unsubscribe(unsub);
  EXPECT_EQ(session.subscriptions(), 0u);
  ASSERT_TRUE(session.Offer({StockEvent(5, "a", 3)}).ok());
  EXPECT_TRUE(Drain(session).empty());
}

TEST_F(SubscriptionTest, FeedSnapshotRowsWaitForTheirCutAndTakeTheirPlaceInSequenceOrder) {
  Set("old", 1);
  Set("new", 1);
  const uint64_t cut = Set("new", 7);  // the store is ahead of what the feed has published
  FeedSession session(*core_, QueueLimits{100, 100});
  ChangeFeed::Attach attach;
  attach.last_sequence = cut - 2;
  session.Attached(attach);
  ASSERT_TRUE(session
                  .CompleteSubscribe(*session.BeginSubscribe(Subscribe({"old"}, false)),
                                     FeedSession::SnapshotRows{})
                  .ok());

  auto sub = session.BeginSubscribe(Subscribe({"new"}, true));
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto rows = session.ReadSnapshot(*sub);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->cut, cut);
  ASSERT_TRUE(session.CompleteSubscribe(*sub, std::move(rows)).ok());
  EXPECT_TRUE(Drain(session).empty()) << "rows left before the feed reached their cut";

  // The feed catches up: an older change of another key, then the snapshot's own change
  // (already in its rows), then one after the cut.
  ASSERT_TRUE(session.Offer({StockEvent(cut - 1, "old", 9), StockEvent(cut, "new", 3, 7)}).ok());
  ASSERT_TRUE(session.Offer({StockEvent(cut + 1, "new", 4, 8)}).ok());
  auto all = Drain(session);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].level().sku(), "old");
  EXPECT_EQ(all[0].sequence(), cut - 1);
  EXPECT_EQ(all[1].kind(), inv::StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(all[1].level().sku(), "new");
  EXPECT_EQ(all[1].level().on_hand(), 7);
  EXPECT_EQ(all[1].sequence(), cut);
  EXPECT_EQ(all[2].kind(), inv::StockUpdate::KIND_CHANGE);
  EXPECT_EQ(all[2].sequence(), cut + 1);
}

TEST_F(SubscriptionTest, AFeedStreamSubscribesToAtMostTheKeyLimit) {
  FeedSession session(*core_, QueueLimits{100, 100});
  std::vector<std::string> many;
  for (size_t i = 0; i < core_->options().limits.max_keys_per_read; ++i) {
    many.push_back("k-" + std::to_string(i));
  }
  ASSERT_TRUE(session.BeginSubscribe(Subscribe(many, false)).ok());
  // The same keys again add nothing; one more is over.
  ASSERT_TRUE(session.BeginSubscribe(Subscribe({"k-0"}, false)).ok());
  auto over = session.BeginSubscribe(Subscribe({"one-more"}, false));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("at most"));
  auto empty = session.BeginSubscribe(Subscribe({}, false));
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("subscribe.keys"));
}

class LeaseSessionTest : public SubscriptionTest {
 protected:
  std::string Hold(const std::string& sku) {
    inv::ReserveRequest r;
    auto* line = r.add_lines();
    line->set_sku(sku);
    line->set_quantity(1);
    auto held = CallSync(*core_, &InventoryCore::Reserve, r);
    EXPECT_TRUE(held.ok()) << held.status();
    return held.ok() ? held->reservation().reservation_id() : "";
  }
  inv::ReservationState StateEventually(const std::string& id, inv::ReservationState want) {
    inv::ReservationState state = inv::RESERVATION_STATE_UNSPECIFIED;
    for (int i = 0; i < 500; ++i) {
      auto r = core_->GetReservation(id);
      state = r.ok() ? r->state() : state;
      if (state == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return state;
  }
};

TEST_F(LeaseSessionTest, LeasedHoldsAreReleasedWhenTheSessionEndsWhateverTheOrder) {
  Set("l", 10);
  FeedSession session(*core_, QueueLimits{100, 100});
  const std::string before = Hold("l");
  const std::string committed = Hold("l");
  const std::string after = Hold("l");
  session.Leased(before);
  session.Leased(committed);
  session.Closed(committed);  // committed through the stream: no longer leased
  EXPECT_EQ(session.leases(), 1u);
  session.End();
  // A Reserve that completes after the end.
  session.Leased(after);
  EXPECT_EQ(StateEventually(before, inv::RESERVATION_STATE_RELEASED),
            inv::RESERVATION_STATE_RELEASED);
  EXPECT_EQ(StateEventually(after, inv::RESERVATION_STATE_RELEASED),
            inv::RESERVATION_STATE_RELEASED);
  auto kept = core_->GetReservation(committed);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->state(), inv::RESERVATION_STATE_HELD);
}

// --- OrderSubscription ----------------------------------------------------------------

TEST_F(SubscriptionTest, AnOrderStreamSendsTheCurrentStatusThenLaterChangesUntilTerminal) {
  OrderSubscription sub("ord-1");
  ASSERT_TRUE(sub.Validate(core_->options().limits).ok());
  EXPECT_FALSE(OrderSubscription("bad id!").Validate(core_->options().limits).ok());
  // Raced with the read: 5 is in the order as read, 6 is not.
  sub.Offer({OrderEvent(5, "ord-1", ord::ORDER_STATUS_PAID),
             OrderEvent(6, "ord-1", ord::ORDER_STATUS_PACKING),
             OrderEvent(7, "ord-2", ord::ORDER_STATUS_PAID)});
  EXPECT_FALSE(sub.Next().has_value()) << "an update before the current status";
  ord::Order current;
  current.set_order_id("ord-1");
  current.set_status(ord::ORDER_STATUS_PAID);
  current.set_sequence(5);
  sub.Start(current);
  sub.Offer({OrderEvent(5, "ord-1", ord::ORDER_STATUS_PAID),
             OrderEvent(9, "ord-1", ord::ORDER_STATUS_DELIVERED)});
  std::vector<std::string> statuses;
  bool ended = false;
  while (auto u = sub.Next()) {
    statuses.push_back(u->status());
    ended = OrderSubscription::Ends(*u);
  }
  EXPECT_EQ(statuses, (std::vector<std::string>{"PAID", "PACKING", "DELIVERED"}));
  EXPECT_TRUE(ended);
}

}  // namespace
}  // namespace feed::core

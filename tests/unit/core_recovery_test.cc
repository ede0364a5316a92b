// Unit tests of the core: Recovery after a restart, storage failures, the queue limit and shutdown.
// Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// Recovery

TEST_F(CoreTest, RecoveryRestoresLevelsHoldsAndSequence) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 10, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  auto held = Reserve({{"sku-a", 2}, {"sku-b", 3, "wh-2"}}, "", "", 60'000);
  ASSERT_OK(held);
  auto done = Reserve({{"sku-a", 1}});
  ASSERT_OK(done);
  ASSERT_OK(Commit(done->reservation().reservation_id()));
  auto order = CreateOrder({"sku-a"});
  ASSERT_OK(order);
  auto keyed = Reserve({{"sku-a", 1}}, "", "k-1", 1'000);
  ASSERT_OK(keyed);

  const uint64_t last = EventCount();
  inv::GetStockRequest all;
  all.add_keys()->set_sku("sku-a");
  all.add_keys()->set_sku("sku-b");
  auto before = core_->GetStock(all);
  ASSERT_OK(before);
  const std::string store_id = StoreId();
  // The stored hold record is the reply's reservation (the writer keeps a plain struct and
  // rebuilds the message for both).
  auto stored_hold = core_->GetReservation(held->reservation().reservation_id());
  ASSERT_OK(stored_hold);
  EXPECT_TRUE(ProtoEq(*stored_hold, held->reservation()));

  Reopen();
  auto stats = core_->stats();
  EXPECT_EQ(stats.held_reservations, 3u);
  EXPECT_EQ(stats.stock_levels, 2u);
  EXPECT_EQ(stats.last_sequence, last);
  auto after = core_->GetStock(all);
  ASSERT_OK(after);
  EXPECT_TRUE(ProtoEq(*after, *before));

  // The recovered holds work, and the sequence continues at last + 1.
  auto c = Commit(held->reservation().reservation_id());
  ASSERT_OK(c);
  // The hold rebuilt from its record closes into the same reservation, lines and all.
  inv::Reservation expected = held->reservation();
  expected.set_state(inv::RESERVATION_STATE_COMMITTED);
  expected.set_closed_at_ms(c->reservation().closed_at_ms());
  EXPECT_TRUE(ProtoEq(c->reservation(), expected));
  EXPECT_EQ(c->reservation().lines_size(), 2);
  auto events = EventsAfter(last);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].sequence(), last + 1);
  EXPECT_EQ(events[0].event_id(), fmt::format("{}-{}", store_id, last + 1));
  EXPECT_EQ(c->sequence(), last + 2);
  EXPECT_EQ(Level("sku-b", "wh-2").on_hand(), 7);

  // Idempotency records survive; the expiry index is rebuilt; orders continue.
  auto replay = Reserve({{"sku-a", 1}}, "", "k-1", 1'000);
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed());
  EXPECT_EQ(replay->reservation().reservation_id(), keyed->reservation().reservation_id());
  clock_.Advance(1'000);
  auto swept = ExpireDue();
  ASSERT_OK(swept);
  EXPECT_EQ(swept->expired_holds, 1u);
  ASSERT_OK(Pay(order->order_id()));
  EXPECT_EQ(Level("sku-a").on_hand(), 6);  // 10 - 1 - 2 - 1
  EXPECT_EQ(Level("sku-a").reserved(), 0);

  // The events from before the restart are still in the journal: a stream resumes across it.
  Recorder rec;
  auto attach = core_->change_feed().Subscribe(&rec, 0);
  EXPECT_FALSE(attach.gap);
  ASSERT_GE(attach.replay.size(), last);
  for (uint64_t i = 0; i < last; ++i) EXPECT_EQ(attach.replay[i]->sequence(), i + 1);
  EXPECT_EQ(attach.replay[0]->event_id(), fmt::format("{}-1", store_id));
  core_->change_feed().Unsubscribe(&rec);
}

TEST_F(CoreTest, AfterARestartOnlyWhatTheJournalStillHoldsIsRetained) {
  for (int i = 0; i < 5; ++i) ASSERT_OK(Adjust("sku-a", 1));
  // A relay delivered the first three events; the checkpoint at shutdown trims them.
  StoreRecord(Table::kMeta, storage::meta_keys::kRelayCursor, storage::EncodeSequence(4));
  Reopen();
  Recorder rec;
  auto attach = core_->change_feed().Subscribe(&rec, 0);
  EXPECT_TRUE(attach.gap);  // 1..3 are gone
  EXPECT_EQ(attach.oldest_retained, 4u);
  core_->change_feed().Unsubscribe(&rec);
  auto resumed = core_->change_feed().Subscribe(&rec, 3);
  EXPECT_FALSE(resumed.gap);
  ASSERT_EQ(resumed.replay.size(), 2u);
  EXPECT_EQ(resumed.replay[0]->sequence(), 4u);
  core_->change_feed().Unsubscribe(&rec);
  check_invariants_ = false;  // the journal no longer starts at 1, on purpose
}

TEST_F(CoreTest, RecoveryRefusesABrokenInvariant) {
  ASSERT_OK(Adjust("sku-a", 10));
  core_.reset();
  // A level that claims 5 reserved units with no open hold behind them.
  inv::StockLevel bad;
  bad.set_sku("sku-a");
  bad.set_location("default");
  bad.set_on_hand(10);
  bad.set_reserved(5);
  bad.set_available(5);
  StoreRecord(Table::kStock, std::string("sku-a\0default", 13), bad.SerializeAsString());
  auto c = InventoryCore::Open(store_, clock_, options_);
  EXPECT_TRUE(IsError(c, absl::StatusCode::kDataLoss, "sku 'sku-a'"));
  check_invariants_ = false;
}

TEST_F(CoreTest, RecoveryRefusesAHoldOnALevelThatDoesNotExist) {
  ASSERT_OK(Adjust("sku-a", 10));
  core_.reset();
  // An open hold whose line names a level the stock table does not have.
  inv::Reservation orphan;
  orphan.set_reservation_id("r-orphan");
  orphan.set_state(inv::RESERVATION_STATE_HELD);
  orphan.set_expires_at_ms(clock_.NowMillis() + 60'000);
  auto* line = orphan.add_lines();
  line->set_sku("sku-gone");
  line->set_location("wh-9");
  line->set_quantity(2);
  StoreRecord(Table::kHolds, orphan.reservation_id(), orphan.SerializeAsString());
  auto c = InventoryCore::Open(store_, clock_, options_);
  EXPECT_TRUE(IsError(c, absl::StatusCode::kDataLoss, "of sku 'sku-gone' at 'wh-9'"));
  check_invariants_ = false;
}

// The writer keeps open holds as plain structs rebuilt from the records: a record that is
// not a HELD reservation under its own id must stop recovery, not become a hold.
TEST_F(CoreTest, RecoveryRefusesAHoldRecordThatIsNotAnOpenHoldUnderItsId) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 2}}, "r-1"));
  core_.reset();
  for (auto spoil : {+[](inv::Reservation& r) { r.set_state(inv::RESERVATION_STATE_RELEASED); },
                     +[](inv::Reservation& r) { r.set_reservation_id("r-other"); }}) {
    auto stored = store_.Get(Table::kHolds, "r-1");
    ASSERT_OK(stored);
    ASSERT_TRUE(stored->has_value());
    inv::Reservation record;
    ASSERT_TRUE(record.ParseFromString(**stored));
    ASSERT_EQ(record.state(), inv::RESERVATION_STATE_HELD);
    spoil(record);
    StoreRecord(Table::kHolds, "r-1", record.SerializeAsString());
    auto c = InventoryCore::Open(store_, clock_, options_);
    EXPECT_TRUE(IsError(c, absl::StatusCode::kDataLoss, "hold record 'r-1' is not a HELD"));
    // Put the good record back for the next case.
    record.set_state(inv::RESERVATION_STATE_HELD);
    record.set_reservation_id("r-1");
    StoreRecord(Table::kHolds, "r-1", record.SerializeAsString());
  }
  // Restored, the store opens again with the hold in place.
  auto c = InventoryCore::Open(store_, clock_, options_);
  ASSERT_OK(c);
  auto hold = (*c)->GetReservation("r-1");
  ASSERT_OK(hold);
  EXPECT_EQ(hold->lines(0).quantity(), 2);
  (*c)->Shutdown();
  check_invariants_ = false;
}

TEST_F(CoreTest, StorageCommitFailureStopsTheCore) {
  ASSERT_OK(Adjust("sku-a", 10));
  const size_t before = EventCount();
  store_.FailNextCommit(absl::InternalError("disk on fire"));
  auto r = Adjust("sku-a", 5);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kUnavailable, "storage commit failed"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("disk on fire"));
  EXPECT_EQ(core_->health().code(), absl::StatusCode::kUnavailable);

  // Every later command is refused, even though the store would accept writes again.
  EXPECT_TRUE(IsError(Adjust("sku-a", 1), absl::StatusCode::kUnavailable, "must restart"));
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 1}}), absl::StatusCode::kUnavailable, "must restart"));
  EXPECT_TRUE(IsError(ExpireDue(), absl::StatusCode::kUnavailable, "must restart"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").on_hand(), 10);  // reads show the committed state

  // A restart recovers the committed state; the sequence has no gap.
  Reopen();
  EXPECT_TRUE(core_->health().ok());
  auto ok = Adjust("sku-a", 5);
  ASSERT_OK(ok);
  EXPECT_EQ(ok->level().on_hand(), 15);
  EXPECT_EQ(ok->sequence(), before + 1);
}

class NoQueueTest : public CoreTest {
 protected:
  NoQueueTest() { options_.max_queue_depth = 0; }
};

TEST_F(NoQueueTest, FullQueueIsResourceExhausted) {
  EXPECT_TRUE(
      IsError(Adjust("sku-a", 1), absl::StatusCode::kResourceExhausted, "writer queue is full"));
  EXPECT_TRUE(IsError(ExpireDue(), absl::StatusCode::kResourceExhausted, "queue"));
  // Validation still comes first.
  EXPECT_TRUE(IsError(Adjust("", 1), absl::StatusCode::kInvalidArgument, "sku"));
  EXPECT_EQ(EventCount(), 0u);
}

TEST_F(CoreTest, ShutdownRejectsWithUnavailable) {
  ASSERT_OK(Adjust("sku-a", 1));
  EXPECT_TRUE(core_->health().ok());
  core_->Shutdown();
  EXPECT_TRUE(IsError(Adjust("sku-a", 1), absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_TRUE(IsError(CreateOrder({"sku-a"}), absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_TRUE(IsError(ExpireDue(), absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_EQ(core_->health().code(), absl::StatusCode::kUnavailable);
  core_->Shutdown();                       // idempotent
  EXPECT_EQ(Level("sku-a").on_hand(), 1);  // reads still work
}

TEST_F(CoreTest, ShutdownCompletesQueuedCommands) {
  constexpr int kCalls = 300;
  Collector<inv::AdjustStockResponse> collector(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    inv::AdjustStockRequest r;
    r.set_sku("sku-a");
    r.set_mode(inv::ADJUST_MODE_DELTA);
    r.set_quantity(1);
    core_->AdjustStock(r, collector.Callback());
  }
  core_->Shutdown();
  auto results = collector.Wait();
  ASSERT_EQ(results.size(), static_cast<size_t>(kCalls));
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Level("sku-a").on_hand(), kCalls);
}

}  // namespace
}  // namespace feed::core_test

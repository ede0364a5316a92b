// Unit tests of the core: the journal and the checkpoints. A batch is committed as one journal
// entry; its records reach the tables at the next checkpoint; a crash between the two loses
// nothing (the journal is replayed), and the tables see each key once per checkpoint.
// Fixture and invariant checks: core_fixture.h.
#include "core/journal_checkpoint.h"
#include "core_fixture.h"

namespace feed::core_test {
namespace {

class JournalTest : public CoreTest {
 protected:
  // Background checkpoints never happen in these tests: only Checkpoint() and Shutdown.
  JournalTest() { options_.checkpoint_interval_ms = 3'600'000; }

  // What the store holds right now, as a crash would leave it (the core is not told).
  std::unique_ptr<storage::MemoryStore> CrashImage() {
    auto image = std::make_unique<storage::MemoryStore>();
    auto group = image->NewWriteGroup();
    for (int t = 0; t < storage::kTableCount; ++t) {
      EXPECT_TRUE(store_
                      .Scan(static_cast<Table>(t), "", "",
                            [&](std::string_view k, std::string_view v) {
                              group->Put(static_cast<Table>(t), k, v);
                              return true;
                            })
                      .ok());
    }
    EXPECT_TRUE(image->Commit(*group, storage::CommitMode::kConfigured).ok());
    return image;
  }

  // A little of everything: levels, holds kept and closed, an order, idempotency keys.
  struct Workload {
    std::vector<std::string> reservations;
    std::string order_id;
  };
  Workload Run(const std::string& tag) {
    Workload w;
    EXPECT_TRUE(Adjust("sku-" + tag, 100).ok());
    EXPECT_TRUE(Adjust("sku-b", 10, inv::ADJUST_MODE_DELTA, "", "wh-2").ok());
    for (int i = 0; i < 6; ++i) {
      auto r =
          Reserve({{"sku-" + tag, 2}, {"sku-b", 1, "wh-2"}}, "", tag + "-r" + std::to_string(i));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) continue;
      w.reservations.push_back(r->reservation().reservation_id());
      if (i % 3 == 0) {
        EXPECT_TRUE(Commit(w.reservations.back(), tag + "-c" + std::to_string(i)).ok());
      } else if (i % 3 == 1) {
        EXPECT_TRUE(Release(w.reservations.back(), "changed mind").ok());
      }
    }
    auto order = CreateOrder({"sku-" + tag, "sku-" + tag}, {}, tag + "-o");
    EXPECT_TRUE(order.ok()) << order.status();
    if (order.ok()) {
      w.order_id = order->order_id();
      EXPECT_TRUE(Pay(w.order_id).ok());
    }
    return w;
  }

  // Every read the workload can check, as one comparable string.
  std::string Reads(InventoryCore& core, const std::vector<Workload>& work) {
    std::string out;
    inv::GetStockRequest all;
    for (const char* sku : {"sku-a", "sku-b", "sku-c"}) all.add_keys()->set_sku(sku);
    auto stock = core.GetStock(all);
    EXPECT_TRUE(stock.ok());
    if (stock.ok()) out += stock->DebugString();
    for (const auto& w : work) {
      for (const auto& id : w.reservations) {
        auto r = core.GetReservation(id);
        out += r.ok() ? r->DebugString() : r.status().ToString();
      }
      auto o = core.GetOrder(w.order_id);
      out += o.ok() ? o->DebugString() : o.status().ToString();
    }
    out += fmt::format("last={} holds={} levels={}", core.stats().last_sequence,
                       core.stats().held_reservations, core.stats().stock_levels);
    return out;
  }

  // A cluster standby's copy of the store: the journal entries (from `after` on) and nothing
  // else, added to `into`.
  void CopyJournal(storage::MemoryStore& into, uint64_t after = 0) {
    auto group = into.NewWriteGroup();
    ASSERT_OK(store_.Scan(Table::kJournal, storage::EncodeSequence(after + 1), "",
                          [&](std::string_view k, std::string_view v) {
                            group->Put(Table::kJournal, k, v);
                            return true;
                          }));
    ASSERT_OK(into.Commit(*group, storage::CommitMode::kConfigured));
  }
  // The table records a core opening `store` writes: what it replayed (plus its id and format).
  size_t PutsOfOpening(storage::MemoryStore& store, const std::string& live,
                       const std::vector<Workload>& work) {
    const auto before = store.write_counts();
    auto opened = InventoryCore::Open(store, clock_, options_);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return SIZE_MAX;
    EXPECT_EQ(Reads(**opened, work), live);
    const size_t puts = store.write_counts().puts - before.puts;
    (*opened)->Shutdown();
    return puts;
  }
};

TEST_F(JournalTest, OneJournalEntryPerBatchAndTheTablesFollowAtCheckpoints) {
  const auto before = store_.write_counts();
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 2}}, "", "k-1");
  ASSERT_OK(r);
  // Two commands, two batches: two journal entries and nothing else.
  auto written = store_.write_counts();
  EXPECT_EQ(written.commits - before.commits, 2u);
  EXPECT_EQ(written.puts - before.puts, 2u);
  EXPECT_EQ(store_.Size(Table::kStock), 0u);
  EXPECT_EQ(store_.Size(Table::kHolds), 0u);
  EXPECT_EQ(store_.Size(Table::kJournal), 2u);
  // Reads see the overlay.
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  ASSERT_OK(core_->GetReservation(r->reservation().reservation_id()));
  EXPECT_EQ(core_->stats().overlay_records, 2u);  // level, hold (which keeps the key's record)

  ASSERT_OK(core_->Checkpoint());
  EXPECT_EQ(store_.Size(Table::kStock), 1u);
  EXPECT_EQ(store_.Size(Table::kHolds), 1u);
  EXPECT_EQ(store_.Size(Table::kIdempotency), 0u);
  EXPECT_EQ(core_->stats().overlay_records, 0u);
  EXPECT_EQ(core_->stats().checkpoint_sequence, 2u);
  auto seq = store_.Get(Table::kMeta, storage::meta_keys::kCheckpointSequence);
  ASSERT_TRUE(seq.ok() && seq->has_value());
  EXPECT_EQ(storage::DecodeSequence(**seq), 2u);
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  // Without a relay the journal is the undelivered outbox: nothing is trimmed.
  EXPECT_EQ(store_.Size(Table::kJournal), 2u);
}

// Delivered and checkpointed entries go at once by default; with a retention they stay for
// replays until they are older than the window or over the size bound, oldest first, and
// what the relay has yet to send is never trimmed.
TEST_F(JournalTest, DeliveredEventsStayForTheRetentionThenGoOldestFirst) {
  uint64_t last = 0;
  auto adjust = [&](int n, int base) {
    for (int i = 0; i < n; ++i) {
      auto r = Adjust("sku-a", base + i);
      ASSERT_OK(r);
      last = r->sequence();
    }
    WaitPublished(last);
  };
  auto deliver_all = [&] {
    StoreRecord(Table::kMeta, storage::meta_keys::kRelayCursor, storage::EncodeSequence(last + 1));
  };
  adjust(10, 10);
  deliver_all();
  ASSERT_OK(core_->Checkpoint());
  EXPECT_EQ(store_.Size(Table::kJournal), 0u);  // no retention: trimmed

  options_.event_retention_ms = 3'600'000;
  Reopen();
  adjust(10, 30);
  ASSERT_OK(core_->Checkpoint());  // not delivered yet: kept whatever the retention
  EXPECT_EQ(store_.Size(Table::kJournal), 10u);
  deliver_all();
  ASSERT_OK(core_->Checkpoint());  // delivered, within the hour: kept
  EXPECT_EQ(store_.Size(Table::kJournal), 10u);

  // A size bound of half the journal: about the older half goes, the newest stay.
  options_.event_retention_bytes = store_.ApproximateBytes(Table::kJournal) / 2;
  Reopen();
  adjust(1, 99);
  deliver_all();
  ASSERT_OK(core_->Checkpoint());
  const size_t kept = store_.Size(Table::kJournal);
  EXPECT_GE(kept, 4u);
  EXPECT_LE(kept, 7u);
  auto newest = store_.Get(Table::kJournal, storage::EncodeSequence(last));
  ASSERT_OK(newest);
  EXPECT_TRUE(newest->has_value());  // the newest entry is kept

  // Two hours later, every entry older than the hour goes; the new one stays.
  clock_.Advance(7'200'000);
  adjust(1, 100);
  deliver_all();
  ASSERT_OK(core_->Checkpoint());
  EXPECT_EQ(store_.Size(Table::kJournal), 1u);
  check_invariants_ = false;  // the fixture's check counts events from sequence 1
}

TEST_F(JournalTest, CrashBeforeAnyCheckpointReplaysTheJournal) {
  std::vector<Workload> work{Run("a")};
  WaitPublished(EventCount());
  const std::string live = Reads(*core_, work);
  EXPECT_EQ(store_.Size(Table::kStock), 0u);  // nothing checkpointed yet
  auto image = CrashImage();
  auto recovered = InventoryCore::Open(*image, clock_, options_);
  ASSERT_OK(recovered);
  EXPECT_EQ(Reads(**recovered, work), live);
  // Recovery wrote what it replayed into the tables.
  EXPECT_GT(image->Size(Table::kStock), 0u);
  EXPECT_EQ((*recovered)->stats().overlay_records, 0u);
  // Idempotency survives the crash: the same keys replay the first answers.
  auto again = CallSync(**recovered, &InventoryCore::Reserve,
                        ReserveReq({{"sku-a", 2}, {"sku-b", 1, "wh-2"}}, "", "a-r2"));
  ASSERT_OK(again);
  EXPECT_TRUE(again->replayed());
  EXPECT_EQ(again->reservation().reservation_id(), work[0].reservations[2]);
  (*recovered)->Shutdown();
}

TEST_F(JournalTest, CrashAfterACheckpointReplaysOnlyWhatFollowsIt) {
  std::vector<Workload> work{Run("a")};
  ASSERT_OK(core_->Checkpoint());
  const uint64_t checkpointed = core_->stats().checkpoint_sequence;
  work.push_back(Run("c"));  // closes nothing of "a"'s; changes sku-b again
  ASSERT_OK(Commit(work[0].reservations[2], "late-commit"));
  WaitPublished(EventCount());
  const std::string live = Reads(*core_, work);
  auto image = CrashImage();
  auto recovered = InventoryCore::Open(*image, clock_, options_);
  ASSERT_OK(recovered);
  EXPECT_EQ(Reads(**recovered, work), live);
  EXPECT_GT((*recovered)->stats().checkpoint_sequence, checkpointed);
  (*recovered)->Shutdown();
}

TEST_F(JournalTest, CrashBetweenTheChunksOfACheckpointLosesNothing) {
  // More records than one checkpoint write takes (512): the checkpoint needs several.
  ASSERT_OK(Adjust("sku-a", 100'000));
  std::vector<Workload> work{Workload{}};
  for (int i = 0; i < 700; ++i) {
    auto r = Reserve({{"sku-a", 1}}, "", "k-" + std::to_string(i));
    ASSERT_OK(r);
    work[0].reservations.push_back(r->reservation().reservation_id());
  }
  work[0].order_id = "ord-none";
  WaitPublished(EventCount());
  const std::string live = Reads(*core_, work);
  store_.FailCommitAfter(1, absl::UnavailableError("power cut"));
  EXPECT_TRUE(IsError(core_->Checkpoint(), absl::StatusCode::kUnavailable, "power cut"));
  // The first chunk is in the tables, the checkpoint marker is not.
  EXPECT_GT(store_.Size(Table::kHolds) + store_.Size(Table::kIdempotency), 0u);
  EXPECT_FALSE(store_.Get(Table::kMeta, storage::meta_keys::kCheckpointSequence)->has_value());
  auto image = CrashImage();
  auto recovered = InventoryCore::Open(*image, clock_, options_);
  ASSERT_OK(recovered);
  EXPECT_EQ(Reads(**recovered, work), live);
  EXPECT_EQ(image->Size(Table::kHolds), 700u);
  (*recovered)->Shutdown();
  // The live core's next checkpoint writes the frozen generation again, whole.
  ASSERT_OK(core_->Checkpoint());
  EXPECT_EQ(store_.Size(Table::kHolds), 700u);
}

TEST_F(JournalTest, ReadsStayRightWhileACheckpointRunsBesideTheWriter) {
  options_.checkpoint_interval_ms = 1;  // checkpoints as fast as they go
  Reopen();
  ASSERT_OK(Adjust("sku-a", 1'000'000));
  int64_t reserved = 0;
  for (int i = 0; i < 300; ++i) {
    auto r = Reserve({{"sku-a", 1}}, "", "k-" + std::to_string(i));
    ASSERT_OK(r);
    ++reserved;
    if (i % 2 == 0) {
      ASSERT_OK(Commit(r->reservation().reservation_id()));
      --reserved;
    }
    // Every read sees every answered change, whichever generation or table holds it.
    ASSERT_EQ(Level("sku-a").reserved(), reserved) << i;
    auto got = core_->GetReservation(r->reservation().reservation_id());
    ASSERT_OK(got);
  }
  EXPECT_GT(core_->stats().checkpoints, 0u);
}

TEST_F(JournalTest, AReservationMadeAndCommittedWritesAboutThreeRecords) {
  ASSERT_OK(Adjust("sku-a", 1'000'000));
  ASSERT_OK(core_->Checkpoint());
  const auto before = store_.write_counts();
  constexpr int kPairs = 200;
  for (int i = 0; i < kPairs; ++i) {
    auto r = Reserve({{"sku-a", 1}}, "", "r-" + std::to_string(i));
    ASSERT_OK(r);
    ASSERT_OK(Commit(r->reservation().reservation_id(), "c-" + std::to_string(i)));
  }
  ASSERT_OK(core_->Checkpoint());
  const auto after = store_.write_counts();
  const double ops =
      static_cast<double>((after.puts - before.puts) + (after.deletes - before.deletes)) / kPairs;
  // One journal entry per command (these calls come one at a time: no batching), and at the
  // checkpoint the closed reservation (which keeps the Reserve's key) and the Commit's
  // idempotency record; the level once, the hold never (opened and closed between two
  // checkpoints).
  EXPECT_LE(ops, 4.1);
  EXPECT_GE(ops, 4.0);
  EXPECT_EQ(after.deletes - before.deletes, 0u);
}

TEST_F(JournalTest, AGapInTheJournalIsRefusedAtStart) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-a", 1));
  ASSERT_OK(Adjust("sku-a", 1));
  core_.reset();  // (its last checkpoint covers everything: the journal is not replayed)
  auto group = store_.NewWriteGroup();
  group->Delete(Table::kMeta, storage::meta_keys::kCheckpointSequence);
  group->Put(Table::kMeta, storage::meta_keys::kNextSequence, storage::EncodeSequence(1));
  group->Delete(Table::kJournal, storage::EncodeSequence(2));
  ASSERT_OK(store_.Commit(*group, storage::CommitMode::kConfigured));
  auto reopened = InventoryCore::Open(store_, clock_, options_);
  EXPECT_TRUE(IsError(reopened, absl::StatusCode::kDataLoss,
                      "journal gap: expected an entry from sequence 2"));
  check_invariants_ = false;
}

TEST_F(JournalTest, AStoreOfANewerFormatIsRefused) {
  core_.reset();
  StoreRecord(Table::kMeta, storage::meta_keys::kFormatVersion,
              storage::EncodeSequence(storage::kFormatVersion + 1));
  auto reopened = InventoryCore::Open(store_, clock_, options_);
  EXPECT_TRUE(IsError(reopened, absl::StatusCode::kFailedPrecondition,
                      "written by data format 4, newer than this server's format 3"));
}

TEST_F(JournalTest, AFormat2StoreIsReadAsItIsAndMarkedFormat3) {
  ASSERT_OK(Adjust("sku-a", 10));
  // Format 2 kept every key in the idempotency table, as a Reserve naming its id still does.
  auto held = Reserve({{"sku-a", 2}}, "hold-1", "k-1");
  ASSERT_OK(held);
  EXPECT_EQ(StoreSize(Table::kIdempotency), 1u);
  ASSERT_OK(core_->Checkpoint());
  core_.reset();
  StoreRecord(Table::kMeta, storage::meta_keys::kFormatVersion, storage::EncodeSequence(2));
  OpenCore();
  auto format = store_.Get(Table::kMeta, storage::meta_keys::kFormatVersion);
  ASSERT_TRUE(format.ok() && format->has_value());
  EXPECT_EQ(storage::DecodeSequence(**format), 3u);
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  auto retry = Reserve({{"sku-a", 2}}, "hold-1", "k-1");
  ASSERT_OK(retry);
  EXPECT_TRUE(retry->replayed());
  EXPECT_EQ(retry->reservation().reservation_id(), "hold-1");
}

TEST_F(JournalTest, ANewStoreRecordsItsFormat) {
  auto format = store_.Get(Table::kMeta, storage::meta_keys::kFormatVersion);
  ASSERT_TRUE(format.ok() && format->has_value());
  EXPECT_EQ(storage::DecodeSequence(**format), storage::kFormatVersion);
}

// A standby's copy holds journal entries only: CheckpointJournal writes their tables as the
// owner's checkpointer would, so a core opened on the copy recovers the same state and has
// nothing left to replay; later entries are folded in by the next call.
TEST_F(JournalTest, AStandbyCopyIsCheckpointedAndATakeoverReplaysNothingOfIt) {
  std::vector<Workload> work{Run("a")};
  WaitPublished(EventCount());  // (last_sequence counts published events)
  storage::MemoryStore standby;
  CopyJournal(standby);
  auto folded = core::CheckpointJournal(standby);
  ASSERT_OK(folded);
  EXPECT_EQ(folded->entries, store_.Size(Table::kJournal));
  EXPECT_EQ(folded->checkpoint_sequence, core_->stats().last_sequence);
  EXPECT_GT(folded->records, 0u);
  EXPECT_GT(standby.Size(Table::kStock), 0u);
  EXPECT_EQ(standby.Size(Table::kJournal), store_.Size(Table::kJournal));  // kept: the outbox

  // More entries arrive; a copy without a checkpoint of them is the control.
  const uint64_t copied = folded->checkpoint_sequence;
  work.push_back(Run("c"));
  ASSERT_OK(Commit(work[0].reservations[2], "late-commit"));
  WaitPublished(EventCount());
  const std::string live = Reads(*core_, work);
  CopyJournal(standby, copied);
  storage::MemoryStore unfolded;
  CopyJournal(unfolded);
  // In rounds of about one entry: each call folds the next.
  size_t calls = 0;
  for (;;) {
    auto more = core::CheckpointJournal(standby, 1);
    ASSERT_OK(more);
    if (more->entries == 0) break;
    EXPECT_EQ(more->entries, 1u);
    ++calls;
  }
  EXPECT_GT(calls, 1u);
  auto again = standby.Get(Table::kMeta, storage::meta_keys::kCheckpointSequence);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ(storage::DecodeSequence(**again), core_->stats().last_sequence);

  const size_t replayed_puts = PutsOfOpening(unfolded, live, work);
  const size_t folded_puts = PutsOfOpening(standby, live, work);
  EXPECT_GT(replayed_puts, 10u);  // the control replayed every entry into its tables
  EXPECT_LE(folded_puts, 2u);     // the store's id and format, nothing replayed
}

TEST_F(JournalTest, AStandbyCheckpointRefusesAGapAndWritesNothing) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-a", 1));
  ASSERT_OK(Adjust("sku-a", 1));
  storage::MemoryStore standby;
  CopyJournal(standby);
  auto group = standby.NewWriteGroup();
  group->Delete(Table::kJournal, storage::EncodeSequence(2));
  ASSERT_OK(standby.Commit(*group, storage::CommitMode::kConfigured));
  const auto before = standby.write_counts();
  EXPECT_TRUE(IsError(core::CheckpointJournal(standby), absl::StatusCode::kDataLoss,
                      "journal gap: expected an entry from sequence 2, found 3..3"));
  EXPECT_EQ(standby.write_counts().puts, before.puts);
  EXPECT_EQ(standby.Size(Table::kStock), 0u);
}

}  // namespace
}  // namespace feed::core_test

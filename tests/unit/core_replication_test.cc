// Unit tests of the core's cluster mode hooks: the replicated log (core/replicated_log.h), with
// a log in memory (every sealed batch reaches the log before its caller is answered, the store
// records the log position with the entry, a failed append stops the core as a failed commit
// does), and ids tagged with their shard. The real log (Kafka, claims, fencing) is tested in
// tests/cluster.
#include "core/replicated_log.h"
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// Rounds are appended when started and confirmed when Confirmed is called (after
// HoldConfirmations, only once ReleaseConfirmations is: rounds then pile up in flight).
class MemoryLog : public core::ReplicatedLog {
 public:
  class MemoryRound : public Round {
   public:
    MemoryRound(MemoryLog& log, absl::StatusOr<std::vector<int64_t>> positions)
        : log_(log), positions_(std::move(positions)) {}
    absl::StatusOr<std::vector<int64_t>> Confirmed() override {
      std::unique_lock lock(log_.mu_);
      log_.cv_.wait(lock, [&] { return !log_.hold_; });
      if (!log_.fail_.ok()) return log_.fail_;
      return positions_;
    }

   private:
    MemoryLog& log_;
    absl::StatusOr<std::vector<int64_t>> positions_;
  };

  std::unique_ptr<Round> Start(const std::vector<std::string_view>& journal_entries) override {
    std::lock_guard lock(mu_);
    if (!fail_.ok()) return std::make_unique<MemoryRound>(*this, fail_);
    std::vector<int64_t> positions;
    for (std::string_view entry : journal_entries) {
      positions.push_back(next_position_);
      next_position_ += 10;  // positions need not be dense (Kafka offsets are not)
      entries_.emplace_back(entry);
    }
    ++rounds_started_;
    return std::make_unique<MemoryRound>(*this, std::move(positions));
  }
  void HoldConfirmations() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  void ReleaseConfirmations() {
    {
      std::lock_guard lock(mu_);
      hold_ = false;
    }
    cv_.notify_all();
  }
  size_t rounds_started() {
    std::lock_guard lock(mu_);
    return rounds_started_;
  }
  std::vector<std::string> entries() {
    std::lock_guard lock(mu_);
    return entries_;
  }
  void Fail(absl::Status status) {
    std::lock_guard lock(mu_);
    fail_ = std::move(status);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  absl::Status fail_;
  int64_t next_position_ = 100;
  size_t rounds_started_ = 0;
  std::vector<std::string> entries_;
};

// Polls `done` for up to 10 s.
template <class Done>
bool WaitUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class ReplicationTest : public CoreTest {
 protected:
  ReplicationTest() { options_.replicated_log = log_; }

  // The journal entries the store holds, in order.
  std::vector<std::string> StoredEntries() {
    std::vector<std::string> out;
    EXPECT_TRUE(store_
                    .Scan(Table::kJournal, "", "",
                          [&](std::string_view, std::string_view value) {
                            out.emplace_back(value);
                            return true;
                          })
                    .ok());
    return out;
  }

  std::shared_ptr<MemoryLog> log_ = std::make_shared<MemoryLog>();
};

TEST_F(ReplicationTest, EveryBatchIsInTheLogBeforeItsCallerIsAnswered) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_EQ(log_->entries().size(), 1u);
  auto reserved = Reserve({{"sku-a", 3}});
  ASSERT_OK(reserved);
  const std::vector<std::string> logged = log_->entries();
  ASSERT_EQ(logged.size(), 2u);

  // The log holds exactly what the store's journal holds, entry for entry.
  EXPECT_EQ(StoredEntries(), logged);
  internal::v1::JournalEntry entry;
  ASSERT_TRUE(entry.ParseFromString(logged[1]));
  ASSERT_EQ(entry.events_size(), 1);
  ev::Event event;
  ASSERT_TRUE(event.ParseFromString(entry.events(0)));
  EXPECT_EQ(event.stock_changed().reservation_id(), reserved->reservation().reservation_id());
  EXPECT_EQ(event.stock_changed().delta_reserved(), 3);

  // The store records the log position of its newest entry.
  auto offset = storage::ReadMetaSequence(store_, storage::meta_keys::kShardLogOffset);
  ASSERT_OK(offset);
  ASSERT_TRUE(offset->has_value());
  EXPECT_EQ(**offset, 110u);
}

TEST_F(ReplicationTest, ConcurrentCallsAreLoggedInCommitOrderWithoutGaps) {
  ASSERT_OK(Adjust("sku-a", 1000));
  constexpr int kCalls = 200;
  Collector<inv::ReserveResponse> results(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    core_->Reserve(ReserveReq({{"sku-a", 1}}), results.Callback(), {});
  }
  for (const auto& r : results.Wait()) ASSERT_OK(r);
  uint64_t next = 1;
  for (const std::string& bytes : log_->entries()) {
    internal::v1::JournalEntry entry;
    ASSERT_TRUE(entry.ParseFromString(bytes));
    EXPECT_EQ(entry.first_sequence(), next);
    next = entry.last_sequence() + 1;
  }
  EXPECT_EQ(next, kCalls + 2u);
}

// Up to replication_rounds_in_flight rounds are on their way at once (the committer seals and
// sends the next while the log confirms the earlier ones), never more; they are stored and
// answered in the order they were started.
TEST_F(ReplicationTest, SeveralRoundsAreOnTheirWayAtOnceAndAnsweredInOrder) {
  ASSERT_OK(Adjust("sku-a", 100));
  const size_t before = log_->rounds_started();
  log_->HoldConfirmations();
  constexpr int kCalls = 6;
  std::mutex mu;
  std::vector<int> answered;  // call numbers, in the order answered
  std::vector<uint64_t> sequences(kCalls);
  auto reserve = [&](int call) {
    core_->Reserve(ReserveReq({{"sku-a", 1}}),
                   [&, call](absl::StatusOr<inv::ReserveResponse> r) {
                     ASSERT_OK(r);
                     std::lock_guard lock(mu);
                     answered.push_back(call);
                     sequences[static_cast<size_t>(call)] = r->sequence();
                   },
                   {});
  };
  const size_t rounds = options_.replication_rounds_in_flight;
  for (size_t call = 0; call < rounds; ++call) {
    reserve(static_cast<int>(call));  // each its own round: the one before is on its way
    ASSERT_TRUE(WaitUntil([&] { return log_->rounds_started() == before + call + 1; }))
        << "round " << call << " did not start while the earlier ones wait";
  }
  for (int call = static_cast<int>(rounds); call < kCalls; ++call) reserve(call);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(log_->rounds_started(), before + rounds) << "more rounds than allowed on their way";
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(answered.empty()) << "a caller was answered before the log confirmed";
  }
  log_->ReleaseConfirmations();
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard lock(mu);
    return answered.size() == kCalls;
  }));
  std::lock_guard lock(mu);
  for (size_t i = 1; i < answered.size(); ++i) {
    EXPECT_LT(sequences[static_cast<size_t>(answered[i - 1])],
              sequences[static_cast<size_t>(answered[i])])
        << "answered out of commit order";
  }
  EXPECT_EQ(StoredEntries(), log_->entries());
}

TEST_F(ReplicationTest, AFailedAppendAnswersNoCallerStoresNothingAndStopsTheCore) {
  ASSERT_OK(Adjust("sku-a", 10));
  log_->Fail(absl::UnavailableError("broker unreachable"));
  auto r = Reserve({{"sku-a", 3}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kUnavailable, "replication failed"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("broker unreachable"));
  EXPECT_EQ(core_->health().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StoredEntries().size(), 1u);  // the failed batch never reached the store

  // Refused from now on, even though the log would take entries again.
  log_->Fail(absl::OkStatus());
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 1}}), absl::StatusCode::kUnavailable, "must restart"));
  EXPECT_EQ(log_->entries().size(), 1u);

  // A restart has the state the log confirmed: nothing reserved.
  Reopen();
  EXPECT_EQ(Level("sku-a").on_hand(), 10);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  ASSERT_OK(Reserve({{"sku-a", 1}}));
  EXPECT_EQ(log_->entries().size(), 2u);
}

class TaggedIdsTest : public CoreTest {
 protected:
  TaggedIdsTest() { options_.generated_id_tag = "s3"; }
};

TEST_F(TaggedIdsTest, GeneratedIdsCarryTheTagAndTheSequence) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto reserved = Reserve({{"sku-a", 1}});
  ASSERT_OK(reserved);
  EXPECT_EQ(reserved->reservation().reservation_id(), "rsv-s3-2");
  ord::CreateOrderRequest order;
  order.set_customer_id("c-1");
  order.add_item_ids("sku-a");
  auto created = CallSync(*core_, &InventoryCore::CreateOrder, order);
  ASSERT_OK(created);
  EXPECT_EQ(created->order_id(), "ord-s3-3");
}

}  // namespace
}  // namespace feed::core_test

// Unit tests of the core's cluster mode hooks: the replicated log (core/replicated_log.h), with
// a log in memory (every sealed batch reaches the log before its caller is answered, the store
// records the log position with the entry, a failed append stops the core as a failed commit
// does), and ids tagged with their shard. The real log (Kafka, claims, fencing) is tested in
// tests/cluster.
#include "core/replicated_log.h"
#include "core_fixture.h"

namespace feed::core_test {
namespace {

class MemoryLog : public core::ReplicatedLog {
 public:
  absl::StatusOr<std::vector<int64_t>> Append(
      const std::vector<std::string_view>& journal_entries) override {
    std::lock_guard lock(mu_);
    if (!fail_.ok()) return fail_;
    std::vector<int64_t> positions;
    for (std::string_view entry : journal_entries) {
      positions.push_back(next_position_);
      next_position_ += 10;  // positions need not be dense (Kafka offsets are not)
      entries_.emplace_back(entry);
    }
    ++appends_;
    return positions;
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
  absl::Status fail_;
  int64_t next_position_ = 100;
  size_t appends_ = 0;
  std::vector<std::string> entries_;
};

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

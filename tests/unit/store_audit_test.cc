// The online audit (core/store_audit.h) on the in-memory store while a core writes to it:
// nothing to report in a sound store, and each kind of broken invariant named with its key
// once a record is spoiled through the storage API.
#include "core/store_audit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "core_fixture.h"

namespace feed::core_test {
namespace {

using ::testing::HasSubstr;

class StoreAuditTest : public CoreTest {
 protected:
  ::admin::v1::CheckStoreResponse Audit(size_t max = 100) {
    auto report = core::AuditStore(store_, clock_, options_, max);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : ::admin::v1::CheckStoreResponse();
  }
  std::set<std::pair<std::string, std::string>> KindsAndKeys(
      const ::admin::v1::CheckStoreResponse& r) {
    std::set<std::pair<std::string, std::string>> out;
    for (const auto& v : r.violations()) out.emplace(v.kind(), v.key());
    return out;
  }
  inv::StockLevel Level(const std::string& sku, int64_t on_hand, int64_t reserved,
                        int64_t available) {
    inv::StockLevel l;
    l.set_sku(sku);
    l.set_location("default");
    l.set_on_hand(on_hand);
    l.set_reserved(reserved);
    l.set_available(available);
    return l;
  }
};

TEST_F(StoreAuditTest, ASoundStoreHasNothingToReportBeforeAndAfterACheckpoint) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 4));
  ASSERT_OK(Reserve({{"sku-a", 3}}, "r-1"));
  ASSERT_OK(Reserve({{"sku-b", 1}}, "r-2"));
  auto last = Commit("r-2");
  ASSERT_OK(last);
  for (bool checkpointed : {false, true}) {
    if (checkpointed) ASSERT_OK(core_->Checkpoint());
    auto r = Audit();
    EXPECT_EQ(r.violation_count(), 0u) << r.DebugString();
    EXPECT_EQ(r.levels_checked(), 2u);
    EXPECT_EQ(r.holds_checked(), 1u);
    EXPECT_EQ(r.as_of_sequence(), last->sequence());  // everything acknowledged
    EXPECT_GT(r.journal_entries_checked(), 0u);
    EXPECT_GT(r.checked_at_ms(), 0);
  }
}

TEST_F(StoreAuditTest, EachBrokenInvariantIsNamedWithItsKeyAndAllAreCounted) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 5));
  ASSERT_OK(Reserve({{"sku-a", 2}}, "r-1"));
  ASSERT_OK(core_->Checkpoint());
  check_invariants_ = false;
  // reserved 5, but r-1 holds 2
  StoreRecord(Table::kStock, std::string("sku-a\0default", 13),
              Level("sku-a", 10, 5, 5).SerializeAsString());
  // available is not on_hand - reserved
  StoreRecord(Table::kStock, std::string("sku-b\0default", 13),
              Level("sku-b", 5, 0, 99).SerializeAsString());
  // negative on_hand and available without backorder
  StoreRecord(Table::kStock, std::string("sku-c\0default", 13),
              Level("sku-c", -3, 0, -3).SerializeAsString());
  // an open hold on a level that does not exist
  inv::Reservation orphan;
  orphan.set_reservation_id("r-orphan");
  orphan.set_state(inv::RESERVATION_STATE_HELD);
  orphan.set_expires_at_ms(clock_.NowMillis() + 60'000);
  auto* line = orphan.add_lines();
  line->set_sku("sku-gone");
  line->set_location("wh-9");
  line->set_quantity(2);
  StoreRecord(Table::kHolds, "r-orphan", orphan.SerializeAsString());

  auto r = Audit();
  EXPECT_EQ(r.violation_count(), 5u) << r.DebugString();
  EXPECT_EQ(KindsAndKeys(r), (std::set<std::pair<std::string, std::string>>{
                                 {"reserved_mismatch", "sku-a@default"},
                                 {"available_mismatch", "sku-b@default"},
                                 {"negative_on_hand", "sku-c@default"},
                                 {"negative_available", "sku-c@default"},
                                 {"hold_without_level", "sku-gone@wh-9"}}));
  for (const auto& v : r.violations()) {
    if (v.kind() == "reserved_mismatch") {
      EXPECT_THAT(v.message(), HasSubstr("has reserved 5 but its open holds sum to 2"));
    }
  }
  // A smaller list, the same count.
  auto one = Audit(1);
  EXPECT_EQ(one.violations_size(), 1);
  EXPECT_EQ(one.violation_count(), 5u);
}

TEST_F(StoreAuditTest, AJournalGapTheRelayHasYetToSendIsNamed) {
  for (int i = 0; i < 4; ++i) ASSERT_OK(Adjust("sku-a", 10 + i));
  ASSERT_OK(core_->Checkpoint());
  check_invariants_ = false;
  // The relay is at sequence 1: entries 1..4 are still to be sent; lose the one of 2.
  StoreRecord(Table::kMeta, storage::meta_keys::kRelayCursor, storage::EncodeSequence(1));
  auto group = store_.NewWriteGroup();
  group->Delete(Table::kJournal, storage::EncodeSequence(2));
  ASSERT_OK(store_.Commit(*group, storage::CommitMode::kConfigured));
  auto r = Audit();
  ASSERT_EQ(r.violation_count(), 1u) << r.DebugString();
  EXPECT_EQ(r.violations(0).kind(), "journal_gap");
  EXPECT_EQ(r.violations(0).key(), "2");
  EXPECT_THAT(r.violations(0).message(), HasSubstr("no entry for sequences 2..2"));
  EXPECT_EQ(r.relay_cursor(), 1u);
}

TEST_F(StoreAuditTest, ARecordThatDoesNotParseIsReported) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(core_->Checkpoint());
  check_invariants_ = false;
  StoreRecord(Table::kStock, std::string("sku-z\0default", 13), "\xff\xff not a level");
  auto r = Audit();
  ASSERT_EQ(r.violation_count(), 1u) << r.DebugString();
  EXPECT_EQ(r.violations(0).kind(), "corrupt_record");
  EXPECT_THAT(r.violations(0).message(), HasSubstr("stock level record is corrupt"));
}

}  // namespace
}  // namespace feed::core_test

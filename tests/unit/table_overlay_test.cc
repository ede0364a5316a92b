// TableOverlay (feed-server/core/src/table_overlay.h) over a MemoryStore: which record a read
// sees (active generation, frozen generation, store), what a checkpoint writes, and views that
// stay consistent while commits and checkpoints go on.
#include "table_overlay.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "storage/memory_store.h"

namespace feed::core {
namespace {

using storage::Table;

struct Change {
  Table table;
  std::string key;
  std::optional<std::string> value;  // nullopt: delete
  bool fresh = false;
};

std::shared_ptr<const MutationLog> Log(const std::vector<Change>& changes) {
  auto log = std::make_shared<MutationLog>();
  for (const auto& c : changes) {
    if (c.value) {
      log->Put(c.table, c.key, *c.value, c.fresh);
    } else {
      log->Delete(c.table, c.key);
    }
  }
  return log;
}

class TableOverlayTest : public ::testing::Test {
 protected:
  void StorePut(Table t, const std::string& key, const std::string& value) {
    auto g = store_.NewWriteGroup();
    g->Put(t, key, value);
    ASSERT_TRUE(store_.Commit(*g, storage::CommitMode::kConfigured).ok());
  }
  std::optional<std::string> Get(Table t, const std::string& key) {
    auto r = overlay_.Get(t, key);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::nullopt;
  }
  // Writes the frozen generation into the store, as the checkpointer does.
  uint64_t Checkpoint() {
    EXPECT_TRUE(overlay_.Freeze());
    auto g = store_.NewWriteGroup();
    auto through = overlay_.WriteFrozen(*g, 2, [&](storage::WriteGroup& full) {
      EXPECT_EQ(full.Count(), 2u);
      absl::Status s = store_.Commit(full, storage::CommitMode::kConfigured);
      full.Clear();
      return s;
    });
    EXPECT_TRUE(through.ok());
    EXPECT_TRUE(store_.Commit(*g, storage::CommitMode::kConfigured).ok());
    overlay_.DropFrozen();
    return through.value_or(0);
  }
  static std::map<std::string, std::string> ScanAll(const storage::ReadView& view, Table t,
                                                    std::string_view start = "",
                                                    std::string_view prefix = "",
                                                    size_t limit = SIZE_MAX) {
    std::map<std::string, std::string> out;
    EXPECT_TRUE(view.Scan(t, start, prefix,
                          [&](std::string_view k, std::string_view v) {
                            out.emplace(std::string(k), std::string(v));
                            return out.size() < limit;
                          })
                    .ok());
    return out;
  }

  storage::MemoryStore store_;
  TableOverlay overlay_{store_};
};

TEST_F(TableOverlayTest, NewestRecordWinsOverTheStore) {
  StorePut(Table::kStock, "a", "store-a");
  StorePut(Table::kStock, "b", "store-b");
  overlay_.Apply(Log({{Table::kStock, "a", "v1"}}), 1);
  overlay_.Apply(Log({{Table::kStock, "a", "v2"}, {Table::kStock, "b", std::nullopt}}), 3);
  EXPECT_EQ(Get(Table::kStock, "a"), "v2");
  EXPECT_EQ(Get(Table::kStock, "b"), std::nullopt);  // deleted in the overlay, still stored
  EXPECT_EQ(Get(Table::kStock, "c"), std::nullopt);
  EXPECT_EQ(Get(Table::kHolds, "a"), std::nullopt);  // tables are apart
  EXPECT_EQ(overlay_.last_sequence(), 3u);
}

TEST_F(TableOverlayTest, CheckpointWritesEachKeyOnceAndKeepsReadsTheSame) {
  StorePut(Table::kStock, "gone", "old");
  for (int i = 1; i <= 100; ++i) {
    overlay_.Apply(Log({{Table::kStock, "hot", "v" + std::to_string(i)}}), i);
  }
  overlay_.Apply(Log({{Table::kStock, "gone", std::nullopt}}), 101);
  const auto before = store_.write_counts();
  EXPECT_EQ(Checkpoint(), 101u);
  const auto written = store_.write_counts();
  EXPECT_EQ(written.puts - before.puts, 1u);  // a hundred changes, one record
  EXPECT_EQ(written.deletes - before.deletes, 1u);
  EXPECT_EQ(overlay_.size().records, 0u);
  EXPECT_EQ(Get(Table::kStock, "hot"), "v100");
  EXPECT_EQ(Get(Table::kStock, "gone"), std::nullopt);
  EXPECT_FALSE(overlay_.Freeze());  // nothing new
}

TEST_F(TableOverlayTest, FreshRecordDeletedBeforeACheckpointNeverReachesTheStore) {
  overlay_.Apply(Log({{Table::kHolds, "h1", "held", true}, {Table::kHolds, "h2", "held", true}}),
                 1);
  overlay_.Apply(Log({{Table::kHolds, "h1", std::nullopt}}), 2);
  EXPECT_EQ(Get(Table::kHolds, "h1"), std::nullopt);
  EXPECT_EQ(Get(Table::kHolds, "h2"), "held");
  const auto before = store_.write_counts();
  Checkpoint();
  const auto written = store_.write_counts();
  EXPECT_EQ(written.puts - before.puts, 1u);        // h2 only
  EXPECT_EQ(written.deletes - before.deletes, 0u);  // no tombstone for h1
  // A record that did reach the store gets its tombstone.
  overlay_.Apply(Log({{Table::kHolds, "h2", std::nullopt}}), 3);
  Checkpoint();
  EXPECT_EQ(store_.write_counts().deletes - written.deletes, 1u);
  EXPECT_EQ(store_.Size(Table::kHolds), 0u);
}

TEST_F(TableOverlayTest, ReadsSeeTheFrozenGenerationWhileItIsWritten) {
  overlay_.Apply(Log({{Table::kStock, "a", "frozen"}, {Table::kStock, "b", "frozen"}}), 1);
  ASSERT_TRUE(overlay_.Freeze());
  overlay_.Apply(Log({{Table::kStock, "b", "active"}, {Table::kHolds, "h", "x", true}}), 2);
  overlay_.Apply(Log({{Table::kHolds, "h", std::nullopt}}), 3);
  EXPECT_EQ(Get(Table::kStock, "a"), "frozen");
  EXPECT_EQ(Get(Table::kStock, "b"), "active");
  EXPECT_FALSE(overlay_.Freeze());  // one frozen generation at a time
  auto g = store_.NewWriteGroup();
  auto through = overlay_.WriteFrozen(*g, 100, [](storage::WriteGroup&) {
    ADD_FAILURE() << "two records do not fill a chunk of 100";
    return absl::OkStatus();
  });
  ASSERT_TRUE(through.ok());
  EXPECT_EQ(*through, 1u);
  ASSERT_TRUE(store_.Commit(*g, storage::CommitMode::kConfigured).ok());
  EXPECT_EQ(Get(Table::kStock, "a"), "frozen");  // store and frozen agree meanwhile
  overlay_.DropFrozen();
  EXPECT_EQ(Get(Table::kStock, "a"), "frozen");
  EXPECT_EQ(Get(Table::kStock, "b"), "active");
  EXPECT_EQ(Checkpoint(), 3u);
  EXPECT_EQ(store_.Size(Table::kHolds), 0u);
}

TEST_F(TableOverlayTest, ScanMergesGenerationsAndStoreInKeyOrder) {
  StorePut(Table::kStock, "a1", "s");
  StorePut(Table::kStock, "a3", "s");
  StorePut(Table::kStock, "a5", "s");
  StorePut(Table::kStock, "b1", "s");
  overlay_.Apply(Log({{Table::kStock, "a2", "f"}, {Table::kStock, "a3", "f"}}), 1);
  ASSERT_TRUE(overlay_.Freeze());
  overlay_.Apply(Log({{Table::kStock, "a3", std::nullopt},
                      {Table::kStock, "a4", "n"},
                      {Table::kStock, "a6", "n"},
                      {Table::kStock, "a0", "n"}}),
                 2);
  ASSERT_TRUE(
      overlay_
          .Read([&](const storage::ReadView& view, uint64_t as_of) {
            EXPECT_EQ(as_of, 2u);
            auto all = ScanAll(view, Table::kStock);
            EXPECT_EQ(all, (std::map<std::string, std::string>{{"a0", "n"},
                                                               {"a1", "s"},
                                                               {"a2", "f"},
                                                               {"a4", "n"},
                                                               {"a5", "s"},
                                                               {"a6", "n"},
                                                               {"b1", "s"}}));
            auto a = ScanAll(view, Table::kStock, "", "a");
            EXPECT_EQ(a.size(), 6u);
            EXPECT_FALSE(a.count("b1"));
            auto from = ScanAll(view, Table::kStock, "a3", "a");
            EXPECT_EQ(from.begin()->first, "a4");
            auto first_two = ScanAll(view, Table::kStock, "a15", "a", 2);
            EXPECT_EQ(first_two, (std::map<std::string, std::string>{{"a2", "f"}, {"a4", "n"}}));
            return absl::OkStatus();
          })
          .ok());
}

TEST_F(TableOverlayTest, SnapshotStaysAsItWasWhileCommitsAndCheckpointsGoOn) {
  StorePut(Table::kStock, std::string("x\0d", 3), "s");
  overlay_.Apply(Log({{Table::kStock, std::string("x\0e", 3), "1"},
                      {Table::kStock, std::string("y\0d", 3), "1"},
                      {Table::kStock, "z", "1"}}),
                 1);
  uint64_t as_of = 0;
  auto snapshot = overlay_.Snapshot(
      Table::kStock, {{std::string("x\0", 2), true}, {std::string("y\0d", 3), false}}, &as_of);
  EXPECT_EQ(as_of, 1u);
  overlay_.Apply(Log({{Table::kStock, std::string("x\0e", 3), "2"},
                      {Table::kStock, std::string("x\0d", 3), "2"},
                      {Table::kStock, std::string("y\0d", 3), std::nullopt}}),
                 2);
  Checkpoint();
  overlay_.Apply(Log({{Table::kStock, std::string("x\0f", 3), "3"}}), 3);
  // Within the ranges it was taken for (outside them it is the store's snapshot alone).
  auto seen = ScanAll(*snapshot, Table::kStock);
  EXPECT_EQ(seen, (std::map<std::string, std::string>{{std::string("x\0d", 3), "s"},
                                                      {std::string("x\0e", 3), "1"},
                                                      {std::string("y\0d", 3), "1"}}));
  auto y = snapshot->Get(Table::kStock, std::string("y\0d", 3));
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*y, "1");
  EXPECT_EQ(Get(Table::kStock, std::string("y\0d", 3)), std::nullopt);  // live: deleted
}

TEST_F(TableOverlayTest, ApplyReportsTheActiveBytesForTheCheckpointTrigger) {
  // A log's bytes plus 64 per record (its slot).
  size_t bytes = overlay_.Apply(Log({{Table::kStock, "k", std::string(100, 'v')}}), 1);
  EXPECT_EQ(bytes, 101u + 64);
  bytes = overlay_.Apply(Log({{Table::kStock, "k", std::string(50, 'v')}}), 2);
  EXPECT_EQ(bytes, 152u + 128);  // the older log is kept until the checkpoint
  Checkpoint();
  EXPECT_EQ(overlay_.active_bytes(), 0u);
  EXPECT_EQ(overlay_.size().bytes, 0u);
}

}  // namespace
}  // namespace feed::core

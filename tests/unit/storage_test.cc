// Tests of the Store contract on a real RocksDB (sync and async) in a fresh temporary
// directory, and of the map-backed MemoryStore the core's unit tests rely on: both must
// behave the same.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "storage/memory_store.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"

extern char** environ;

namespace feed::storage {
namespace {

// A fresh directory under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/feed-storage-test-XXXXXX";
    char* p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<Store> OpenRocks(const std::string& path, Durability durability) {
  RocksDbOptions o;
  o.path = path;
  o.durability = durability;
  auto s = OpenRocksDbStore(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::optional<std::string> GetOrDie(const ReadView& view, Table t, std::string_view key) {
  auto v = view.Get(t, key);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::nullopt;
}

using Rows = std::vector<std::pair<std::string, std::string>>;

Rows ScanAll(const ReadView& view, Table t, std::string_view start, std::string_view prefix,
             size_t limit = SIZE_MAX) {
  Rows rows;
  auto s = view.Scan(t, start, prefix, [&](std::string_view k, std::string_view v) {
    rows.emplace_back(std::string(k), std::string(v));
    return rows.size() < limit;
  });
  EXPECT_TRUE(s.ok()) << s;
  return rows;
}

std::vector<std::string> Keys(const Rows& rows) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : rows) keys.push_back(k);
  return keys;
}

void Put(Store& store, Table t, std::string_view k, std::string_view v) {
  auto g = store.NewWriteGroup();
  g->Put(t, k, v);
  ASSERT_TRUE(store.Commit(*g).ok());
}

constexpr Table kAllTables[] = {Table::kStock,  Table::kHolds,       Table::kReservations,
                                Table::kOrders, Table::kIdempotency, Table::kJournal,
                                Table::kMeta};

// ---------------------------------------------------------------------------------------
// The contract, run against RocksDB (sync, async) and MemoryStore.

enum class Kind { kRocksSync, kRocksAsync, kMemory };

class StoreContractTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Kind::kRocksSync:
        store_ = OpenRocks(dir_.path(), Durability::kSync);
        break;
      case Kind::kRocksAsync:
        store_ = OpenRocks(dir_.path(), Durability::kAsync);
        break;
      case Kind::kMemory:
        store_ = std::make_unique<MemoryStore>();
        break;
    }
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override { store_.reset(); }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, PutGetDeletePerTable) {
  // The same key in every table holds that table's own value.
  auto g = store_->NewWriteGroup();
  for (Table t : kAllTables) g->Put(t, "key", fmt::format("value-{}", TableName(t)));
  EXPECT_EQ(g->Count(), 7u);
  EXPECT_GT(g->ByteSize(), 0u);
  ASSERT_TRUE(store_->Commit(*g).ok());
  for (Table t : kAllTables) {
    EXPECT_EQ(GetOrDie(*store_, t, "key"), fmt::format("value-{}", TableName(t))) << TableName(t);
    EXPECT_EQ(GetOrDie(*store_, t, "other"), std::nullopt);
  }
  // Overwrite in one table, delete in another: the rest are untouched.
  auto g2 = store_->NewWriteGroup();
  g2->Put(Table::kOrders, "key", "new");
  g2->Delete(Table::kHolds, "key");
  g2->Delete(Table::kHolds, "never-existed");
  ASSERT_TRUE(store_->Commit(*g2).ok());
  EXPECT_EQ(GetOrDie(*store_, Table::kOrders, "key"), "new");
  EXPECT_EQ(GetOrDie(*store_, Table::kHolds, "key"), std::nullopt);
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "key"), "value-stock");
  EXPECT_EQ(GetOrDie(*store_, Table::kMeta, "key"), "value-meta");

  // Keys and values are bytes: NUL inside, empty value.
  std::string nul_key("a\0b", 3);
  Put(*store_, Table::kStock, nul_key, std::string("\0\xff", 2));
  Put(*store_, Table::kStock, "empty", "");
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, nul_key), std::string("\0\xff", 2));
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "a"), std::nullopt);
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "empty"), "");
}

TEST_P(StoreContractTest, ScanWithStartAndPrefix) {
  auto g = store_->NewWriteGroup();
  for (const char* k : {"b1", "a2", "a1", "a3", "b2", "ab"}) g->Put(Table::kStock, k, k);
  g->Put(Table::kOrders, "a0", "other table");
  ASSERT_TRUE(store_->Commit(*g).ok());

  using V = std::vector<std::string>;
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "", "")), (V{"a1", "a2", "a3", "ab", "b1", "b2"}));
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "", "a")), (V{"a1", "a2", "a3", "ab"}));
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "a2", "a")), (V{"a2", "a3", "ab"}));
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "a25", "a")), (V{"a3", "ab"}));
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "a2", "")), (V{"a2", "a3", "ab", "b1", "b2"}));
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "", "b")), (V{"b1", "b2"}));
  // start before the prefix: the scan still begins at the prefix.
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "a", "b")), (V{"b1", "b2"}));
  // start past every key of the prefix: nothing.
  EXPECT_TRUE(ScanAll(*store_, Table::kStock, "c", "b").empty());
  EXPECT_TRUE(ScanAll(*store_, Table::kStock, "", "z").empty());
  EXPECT_TRUE(ScanAll(*store_, Table::kHolds, "", "").empty());
  // Returning false stops the scan.
  EXPECT_EQ(Keys(ScanAll(*store_, Table::kStock, "", "", 2)), (V{"a1", "a2"}));
  // Values come with their keys.
  auto rows = ScanAll(*store_, Table::kStock, "b2", "b");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].second, "b2");

  // Prefix scans over keys with an embedded NUL (the core's "sku\0location" keys).
  auto g2 = store_->NewWriteGroup();
  g2->Put(Table::kHolds, std::string("sku\0wh-1", 8), "1");
  g2->Put(Table::kHolds, std::string("sku\0wh-2", 8), "2");
  g2->Put(Table::kHolds, std::string("sku2\0wh-1", 9), "3");
  ASSERT_TRUE(store_->Commit(*g2).ok());
  auto sku = ScanAll(*store_, Table::kHolds, "", std::string("sku\0", 4));
  ASSERT_EQ(sku.size(), 2u);
  EXPECT_EQ(sku[0].second, "1");
  EXPECT_EQ(sku[1].second, "2");
}

TEST_P(StoreContractTest, DeleteRangeIsHalfOpen) {
  auto g = store_->NewWriteGroup();
  for (uint64_t i = 1; i <= 10; ++i) {
    g->Put(Table::kJournal, EncodeSequence(i), fmt::format("e{}", i));
    g->Put(Table::kMeta, EncodeSequence(i), "untouched");
  }
  ASSERT_TRUE(store_->Commit(*g).ok());
  auto d = store_->NewWriteGroup();
  d->DeleteRange(Table::kJournal, EncodeSequence(3), EncodeSequence(7));
  ASSERT_TRUE(store_->Commit(*d).ok());
  std::vector<uint64_t> left;
  for (const auto& [k, v] : ScanAll(*store_, Table::kJournal, "", "")) {
    left.push_back(*DecodeSequence(k));
  }
  EXPECT_EQ(left, (std::vector<uint64_t>{1, 2, 7, 8, 9, 10}));
  EXPECT_EQ(ScanAll(*store_, Table::kMeta, "", "").size(), 10u);

  // A range and a put of the same batch: the later operation wins.
  auto d2 = store_->NewWriteGroup();
  d2->DeleteRange(Table::kJournal, EncodeSequence(0), EncodeSequence(100));
  d2->Put(Table::kJournal, EncodeSequence(50), "after");
  ASSERT_TRUE(store_->Commit(*d2).ok());
  auto rest = ScanAll(*store_, Table::kJournal, "", "");
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].second, "after");
}

TEST_P(StoreContractTest, WriteCountsFollowCommittedGroups) {
  const Store::WriteCounts before = store_->write_counts();
  auto g = store_->NewWriteGroup();
  g->Put(Table::kStock, "a", "1");
  g->Put(Table::kHolds, "h", "2");
  g->Delete(Table::kHolds, "gone");
  g->DeleteRange(Table::kJournal, EncodeSequence(1), EncodeSequence(9));
  EXPECT_EQ(g->Operations().puts, 2u);
  EXPECT_EQ(g->Operations().deletes, 1u);
  EXPECT_EQ(g->Operations().range_deletes, 1u);
  ASSERT_TRUE(store_->Commit(*g).ok());
  const Store::WriteCounts after = store_->write_counts();
  EXPECT_EQ(after.commits - before.commits, 1u);
  EXPECT_EQ(after.puts - before.puts, 2u);
  EXPECT_EQ(after.deletes - before.deletes, 1u);
  EXPECT_EQ(after.range_deletes - before.range_deletes, 1u);
  // A cleared group starts from zero and adds nothing when committed empty.
  g->Clear();
  EXPECT_EQ(g->Operations().puts, 0u);
  ASSERT_TRUE(store_->Commit(*g).ok());
  EXPECT_EQ(store_->write_counts().puts, after.puts);
}

TEST_P(StoreContractTest, WriteGroupIsAtomicAcrossTables) {
  Put(*store_, Table::kHolds, "h1", "held");
  auto g = store_->NewWriteGroup();
  g->Put(Table::kStock, "sku", "level");
  g->Put(Table::kJournal, EncodeSequence(1), "event");
  g->Put(Table::kMeta, "next_sequence", EncodeSequence(2));
  g->Delete(Table::kHolds, "h1");
  g->Put(Table::kReservations, "h1", "closed");
  EXPECT_EQ(g->Count(), 5u);
  // Nothing is visible before Commit.
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "sku"), std::nullopt);
  EXPECT_EQ(GetOrDie(*store_, Table::kHolds, "h1"), "held");
  ASSERT_TRUE(store_->Commit(*g).ok());
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "sku"), "level");
  EXPECT_EQ(GetOrDie(*store_, Table::kJournal, EncodeSequence(1)), "event");
  EXPECT_EQ(GetOrDie(*store_, Table::kMeta, "next_sequence"), EncodeSequence(2));
  EXPECT_EQ(GetOrDie(*store_, Table::kHolds, "h1"), std::nullopt);
  EXPECT_EQ(GetOrDie(*store_, Table::kReservations, "h1"), "closed");

  // Clear empties a group; an empty group commits nothing.
  auto c = store_->NewWriteGroup();
  c->Put(Table::kStock, "ghost", "x");
  c->Clear();
  EXPECT_EQ(c->Count(), 0u);
  ASSERT_TRUE(store_->Commit(*c).ok());
  ASSERT_TRUE(store_->Commit(*c, CommitMode::kNoSync).ok());
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "ghost"), std::nullopt);
}

TEST_P(StoreContractTest, SnapshotIsIsolatedFromLaterWrites) {
  Put(*store_, Table::kStock, "k", "v1");
  Put(*store_, Table::kStock, "gone", "still here");
  auto snap = store_->Snapshot();

  auto g = store_->NewWriteGroup();
  g->Put(Table::kStock, "k", "v2");
  g->Put(Table::kStock, "k2", "new");
  g->Delete(Table::kStock, "gone");
  g->Put(Table::kJournal, EncodeSequence(1), "e1");
  ASSERT_TRUE(store_->Commit(*g).ok());

  EXPECT_EQ(GetOrDie(*snap, Table::kStock, "k"), "v1");
  EXPECT_EQ(GetOrDie(*snap, Table::kStock, "k2"), std::nullopt);
  EXPECT_EQ(GetOrDie(*snap, Table::kStock, "gone"), "still here");
  EXPECT_EQ(GetOrDie(*snap, Table::kJournal, EncodeSequence(1)), std::nullopt);
  auto rows = ScanAll(*snap, Table::kStock, "", "");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::pair<std::string, std::string>{"gone", "still here"}));
  EXPECT_EQ(rows[1], (std::pair<std::string, std::string>{"k", "v1"}));
  EXPECT_TRUE(ScanAll(*snap, Table::kJournal, "", "").empty());

  // The store itself sees the new state; a new snapshot too.
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "k"), "v2");
  EXPECT_EQ(GetOrDie(*store_, Table::kStock, "gone"), std::nullopt);
  EXPECT_EQ(ScanAll(*store_->Snapshot(), Table::kStock, "", "").size(), 2u);
  snap.reset();
}

TEST_P(StoreContractTest, OutboxScansInSequenceOrder) {
  // Written in a random order, read back in numeric order: the relay depends on it.
  std::vector<uint64_t> seqs = {
      1, 2, 255, 256, 257, 65535, 65536, 1ULL << 32, (1ULL << 40) + 3, UINT64_MAX - 1};
  std::vector<uint64_t> shuffled = seqs;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));
  auto g = store_->NewWriteGroup();
  for (uint64_t s : shuffled) g->Put(Table::kJournal, EncodeSequence(s), fmt::format("{}", s));
  ASSERT_TRUE(store_->Commit(*g).ok());
  std::vector<uint64_t> read;
  for (const auto& [k, v] : ScanAll(*store_, Table::kJournal, "", "")) {
    read.push_back(*DecodeSequence(k));
    EXPECT_EQ(v, fmt::format("{}", read.back()));
  }
  EXPECT_EQ(read, seqs);
  // Resuming from a cursor.
  auto from = ScanAll(*store_, Table::kJournal, EncodeSequence(300), "", 2);
  ASSERT_EQ(from.size(), 2u);
  EXPECT_EQ(DecodeSequence(from[0].first), 65535u);
  EXPECT_EQ(DecodeSequence(from[1].first), 65536u);
}

TEST_P(StoreContractTest, DurabilityIsReported) {
  EXPECT_EQ(store_->durability(),
            GetParam() == Kind::kRocksAsync ? Durability::kAsync : Durability::kSync);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContractTest,
                         ::testing::Values(Kind::kRocksSync, Kind::kRocksAsync, Kind::kMemory),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           switch (info.param) {
                             case Kind::kRocksSync:
                               return std::string("RocksSync");
                             case Kind::kRocksAsync:
                               return std::string("RocksAsync");
                             case Kind::kMemory:
                               return std::string("Memory");
                           }
                           return std::string("unknown");
                         });

// ---------------------------------------------------------------------------------------
// RocksDB only: persistence and locking.

class RocksTest : public ::testing::TestWithParam<Durability> {};

TEST_P(RocksTest, ReopenKeepsData) {
  TempDir dir;
  {
    auto store = OpenRocks(dir.path(), GetParam());
    ASSERT_NE(store, nullptr);
    auto g = store->NewWriteGroup();
    for (Table t : kAllTables) g->Put(t, "k", fmt::format("persisted-{}", TableName(t)));
    for (uint64_t i = 1; i <= 1000; ++i)
      g->Put(Table::kJournal, EncodeSequence(i), fmt::format("{}", i));
    ASSERT_TRUE(store->Commit(*g).ok());
    auto g2 = store->NewWriteGroup();
    g2->Delete(Table::kHolds, "k");
    g2->DeleteRange(Table::kJournal, EncodeSequence(1), EncodeSequence(501));
    ASSERT_TRUE(store->Commit(*g2, CommitMode::kNoSync).ok());
  }
  for (int round = 0; round < 2; ++round) {
    auto store = OpenRocks(dir.path(), GetParam());
    ASSERT_NE(store, nullptr);
    for (Table t : kAllTables) {
      if (t == Table::kHolds) {
        EXPECT_EQ(GetOrDie(*store, t, "k"), std::nullopt);
      } else {
        EXPECT_EQ(GetOrDie(*store, t, "k"), fmt::format("persisted-{}", TableName(t)));
      }
    }
    // Sequences below 2^16 share six leading zero bytes ("k" does not).
    auto outbox = ScanAll(*store, Table::kJournal, "", std::string(6, '\0'));
    ASSERT_EQ(outbox.size(), 500u);
    EXPECT_EQ(DecodeSequence(outbox.front().first), 501u);
    EXPECT_EQ(DecodeSequence(outbox.back().first), 1000u);
  }
}

TEST_P(RocksTest, SecondOpenOfTheSamePathFailsWhileTheFirstIsOpen) {
  TempDir dir;
  auto first = OpenRocks(dir.path(), GetParam());
  ASSERT_NE(first, nullptr);
  Put(*first, Table::kStock, "k", "v");

  RocksDbOptions o;
  o.path = dir.path();
  o.durability = GetParam();
  auto second = OpenRocksDbStore(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  std::string msg(second.status().message().data(), second.status().message().size());
  EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
  EXPECT_NE(msg.find("another server"), std::string::npos) << msg;

  // The failed open did not disturb the first one, and the path opens once it is closed.
  EXPECT_EQ(GetOrDie(*first, Table::kStock, "k"), "v");
  first.reset();
  auto third = OpenRocks(dir.path(), GetParam());
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(GetOrDie(*third, Table::kStock, "k"), "v");
}

// Bytes in the database's write-ahead log files, and how many table files it has.
uint64_t WalBytes(const std::string& path) {
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    if (e.path().extension() == ".log") bytes += e.file_size();
  }
  return bytes;
}
std::set<std::string> TableFiles(const std::string& path) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    if (e.path().extension() == ".sst") names.insert(e.path().filename());
  }
  return names;
}

TEST_P(RocksTest, CleanCloseLeavesNoWalToReplay) {
  TempDir dir;
  const std::string value(1000, 'v');
  {
    auto store = OpenRocks(dir.path(), GetParam());
    ASSERT_NE(store, nullptr);
    auto g = store->NewWriteGroup();
    for (int i = 0; i < 2000; ++i) g->Put(Table::kHolds, fmt::format("hold-{}", i), value);
    ASSERT_TRUE(store->Commit(*g).ok());
    ASSERT_GT(WalBytes(dir.path()), 2000u * 1000u);  // all of it is in the WAL, not yet flushed
  }
  // The memtables were written to table files at close: the next open replays nothing.
  EXPECT_LT(WalBytes(dir.path()), 1024u);
  auto store = OpenRocks(dir.path(), GetParam());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(ScanAll(*store, Table::kHolds, "", "").size(), 2000u);
  EXPECT_EQ(GetOrDie(*store, Table::kHolds, "hold-1999"), value);
}

TEST(RocksDeferredCompactionTest, NothingIsCompactedUntilStartCompactions) {
  TempDir dir;
  RocksDbOptions o;
  o.path = dir.path();
  o.durability = Durability::kAsync;
  o.memtable_budget_bytes = 256u << 10;  // a flush every ~256 KB written
  o.defer_compactions = true;
  auto opened = OpenRocksDbStore(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  const std::string value(1000, 'v');
  auto wait_for = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 200 && !done(); ++i) usleep(50'000);  // up to 10 s
    return done();
  };
  // 4 MB in 40 groups: with compactions on, level 0 would be compacted every 2 files.
  for (int group = 0; group < 40; ++group) {
    auto g = store.NewWriteGroup();
    for (int i = 0; i < 100; ++i) g->Put(Table::kJournal, fmt::format("e-{}-{}", group, i), value);
    ASSERT_TRUE(store.Commit(*g).ok());
  }
  // A compaction replaces table files with new ones; flushes only add files.
  ASSERT_TRUE(wait_for([&] { return TableFiles(dir.path()).size() >= 8; }))
      << TableFiles(dir.path()).size() << " table files: the flushes did not happen";
  usleep(500'000);
  const std::set<std::string> flushed = TableFiles(dir.path());
  auto one_is_gone = [&] {
    std::set<std::string> now = TableFiles(dir.path());
    return std::any_of(flushed.begin(), flushed.end(),
                       [&](const std::string& name) { return !now.count(name); });
  };
  usleep(500'000);
  EXPECT_FALSE(one_is_gone()) << "table files were compacted while compactions were deferred";

  store.StartCompactions();
  EXPECT_TRUE(wait_for(one_is_gone)) << "none of the " << flushed.size()
                                     << " flushed table files was compacted after StartCompactions";
  EXPECT_EQ(ScanAll(store, Table::kJournal, "", "").size(), 4000u);
  store.StartCompactions();  // a second call changes nothing
  EXPECT_EQ(GetOrDie(store, Table::kJournal, "e-39-99"), value);
}

TEST(RocksRetentionTest, CompactionDropsExpiredRecordsAndKeepsTheRest) {
  TempDir dir;
  RocksDbOptions o;
  o.path = dir.path();
  o.idempotency_retention_ms = 60'000;
  std::set<Table> asked;
  std::mutex asked_mu;
  // The rule is the caller's; here a value starting with "old" has expired.
  o.history_expired = [&](Table t, std::string_view value, int64_t now_ms) {
    std::lock_guard lock(asked_mu);
    asked.insert(t);
    EXPECT_GT(now_ms, 1'700'000'000'000);  // wall-clock milliseconds
    return value.substr(0, 3) == "old";
  };
  auto opened = OpenRocksDbStore(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  auto g = store.NewWriteGroup();
  g->Put(Table::kReservations, "closed-old", "old reservation");
  g->Put(Table::kReservations, "closed-new", "new reservation");
  g->Put(Table::kOrders, "order-old", "old order");
  g->Put(Table::kOrders, "order-new", "new order");
  g->Put(Table::kHolds, "hold", "old, but holds are never filtered");
  g->Put(Table::kJournal, EncodeSequence(1), "old, but the outbox is never filtered");
  g->Put(Table::kIdempotency, "key-old", EncodeTimestamped(now_ms - 120'000, "response"));
  g->Put(Table::kIdempotency, "key-new", EncodeTimestamped(now_ms - 1'000, "response"));
  ASSERT_TRUE(store.Commit(*g).ok());
  // Until a compaction reaches them, expired records are still there.
  EXPECT_TRUE(GetOrDie(store, Table::kReservations, "closed-old").has_value());

  ASSERT_TRUE(store.CompactAll().ok());
  EXPECT_FALSE(GetOrDie(store, Table::kReservations, "closed-old").has_value());
  EXPECT_FALSE(GetOrDie(store, Table::kOrders, "order-old").has_value());
  EXPECT_FALSE(GetOrDie(store, Table::kIdempotency, "key-old").has_value());
  EXPECT_EQ(GetOrDie(store, Table::kReservations, "closed-new"), "new reservation");
  EXPECT_EQ(GetOrDie(store, Table::kOrders, "order-new"), "new order");
  EXPECT_TRUE(GetOrDie(store, Table::kIdempotency, "key-new").has_value());
  EXPECT_TRUE(GetOrDie(store, Table::kHolds, "hold").has_value());
  EXPECT_TRUE(GetOrDie(store, Table::kJournal, EncodeSequence(1)).has_value());
  std::lock_guard lock(asked_mu);
  EXPECT_EQ(asked, (std::set<Table>{Table::kReservations, Table::kOrders}));
}

INSTANTIATE_TEST_SUITE_P(Durabilities, RocksTest,
                         ::testing::Values(Durability::kSync, Durability::kAsync),
                         [](const ::testing::TestParamInfo<Durability>& info) {
                           return std::string(info.param == Durability::kSync ? "Sync" : "Async");
                         });

TEST(RocksProcessTest, SecondOpenFromAnotherProcessFails) {
  TempDir dir;
  auto first = OpenRocks(dir.path(), Durability::kSync);
  ASSERT_NE(first, nullptr);

  std::string out_path = dir.path() + ".child-output";
  std::string env_path = "FEED_STORAGE_TEST_LOCKED_PATH=" + dir.path();
  std::vector<std::string> env_strings = {env_path};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  char* argv[] = {exe.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(rc, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::string child_err;
  {
    FILE* f = fopen(out_path.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) child_err.append(buf, n);
    fclose(f);
    std::filesystem::remove(out_path);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << child_err;
  EXPECT_NE(child_err.find("FAILED_PRECONDITION"), std::string::npos) << child_err;
}

TEST(RocksProcessTest, OpenOnAFileFailsClearly) {
  TempDir dir;
  std::string file = dir.path() + "/not-a-dir";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("x", f);
  fclose(f);
  RocksDbOptions o;
  o.path = file;
  auto s = OpenRocksDbStore(o);
  ASSERT_FALSE(s.ok());
  std::string msg(s.status().message().data(), s.status().message().size());
  EXPECT_NE(msg.find(file), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------
// MemoryStore test hooks.

TEST(MemoryStoreTest, FailNextCommitFailsExactlyOneCommitAndAppliesNothing) {
  MemoryStore store;
  store.FailNextCommit(absl::UnavailableError("injected"));
  auto g = store.NewWriteGroup();
  g->Put(Table::kStock, "k", "v");
  auto s = store.Commit(*g, CommitMode::kConfigured);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.Size(Table::kStock), 0u);
  EXPECT_EQ(store.commits(), 0u);
  ASSERT_TRUE(store.Commit(*g, CommitMode::kConfigured).ok());
  EXPECT_EQ(store.Size(Table::kStock), 1u);
  EXPECT_EQ(store.commits(), 1u);
}

// ---------------------------------------------------------------------------------------
// Encodings.

TEST(EncodingTest, SequenceIsEightBytesBigEndianAndSortsNumerically) {
  EXPECT_EQ(EncodeSequence(0), std::string(8, '\0'));
  EXPECT_EQ(EncodeSequence(1), std::string("\0\0\0\0\0\0\0\x01", 8));
  EXPECT_EQ(EncodeSequence(0x0102030405060708ULL),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_LT(EncodeSequence(255), EncodeSequence(256));
  EXPECT_LT(EncodeSequence(256), EncodeSequence(65536));
  EXPECT_LT(EncodeSequence(65536), EncodeSequence(1ULL << 32));
  EXPECT_LT(EncodeSequence(9), EncodeSequence(10));  // unlike decimal text
  EXPECT_LT(EncodeSequence(UINT64_MAX - 1), EncodeSequence(UINT64_MAX));
  std::mt19937_64 rng(42);
  for (int i = 0; i < 10000; ++i) {
    uint64_t a = rng() >> (rng() % 64), b = rng() >> (rng() % 64);
    ASSERT_EQ(a < b, EncodeSequence(a) < EncodeSequence(b)) << a << " " << b;
    ASSERT_EQ(DecodeSequence(EncodeSequence(a)), a);
  }
  EXPECT_EQ(DecodeSequence(EncodeSequence(UINT64_MAX)), UINT64_MAX);
  EXPECT_EQ(DecodeSequence(""), std::nullopt);
  EXPECT_EQ(DecodeSequence("1234567"), std::nullopt);
  EXPECT_EQ(DecodeSequence("123456789"), std::nullopt);
}

TEST(EncodingTest, TimestampedRoundTrip) {
  for (int64_t ts : {int64_t{0}, int64_t{1}, int64_t{1'700'000'000'000}, INT64_MAX}) {
    for (std::string payload : {std::string(), std::string("hello"), std::string("\0\x01\xff", 3),
                                std::string(10000, 'x')}) {
      std::string v = EncodeTimestamped(ts, payload);
      EXPECT_EQ(v.size(), payload.size() + 8);
      int64_t got_ts = -1;
      std::string_view got_payload;
      ASSERT_TRUE(DecodeTimestamped(v, &got_ts, &got_payload));
      EXPECT_EQ(got_ts, ts);
      EXPECT_EQ(got_payload, payload);
    }
  }
  // The time prefix is big-endian, so values sort by creation time.
  EXPECT_LT(EncodeTimestamped(999, "zzz"), EncodeTimestamped(1000, "aaa"));
  int64_t ts = 0;
  std::string_view payload;
  EXPECT_FALSE(DecodeTimestamped("short", &ts, &payload));
  EXPECT_TRUE(DecodeTimestamped(std::string(8, '\0'), &ts, &payload));
  EXPECT_EQ(ts, 0);
  EXPECT_TRUE(payload.empty());
}

TEST(EncodingTest, TableNames) {
  std::vector<std::string> names;
  for (Table t : kAllTables) names.emplace_back(TableName(t));
  EXPECT_EQ(names, (std::vector<std::string>{"stock", "holds", "reservations", "orders",
                                             "idempotency", "journal", "meta"}));
}

}  // namespace
}  // namespace feed::storage

// With FEED_STORAGE_TEST_LOCKED_PATH set, this binary is the child of
// SecondOpenFromAnotherProcessFails: it tries to open that (locked) path, prints the status
// and exits 0 only if the open failed with FAILED_PRECONDITION.
int main(int argc, char** argv) {
  if (const char* path = std::getenv("FEED_STORAGE_TEST_LOCKED_PATH")) {
    feed::storage::RocksDbOptions o;
    o.path = path;
    auto s = feed::storage::OpenRocksDbStore(o);
    std::fprintf(stderr, "child open: %s\n", s.ok() ? "OK" : s.status().ToString().c_str());
    return !s.ok() && s.status().code() == absl::StatusCode::kFailedPrecondition ? 0 : 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

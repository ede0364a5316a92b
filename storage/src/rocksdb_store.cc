#include "storage/rocksdb_store.h"

#include <atomic>
#include <chrono>
#include <vector>

#include "logging.h"
#include "power_loss_fs.h"
#include "rocksdb/compaction_filter.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/utilities/options_util.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"

namespace feed::storage {
namespace {

// Format 1's table of single events, which --migrate turns into journal entries.
constexpr std::string_view kFormat1Outbox = "outbox";

absl::Status ToStatus(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return absl::FailedPreconditionError(msg + " (is another server using this data dir?)");
  }
  return absl::InternalError(msg);
}

rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }
std::string_view ToView(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Drops, when a compaction reaches them, the records that have outlived their retention:
// idempotency records by the creation time in front of them, closed reservations and
// finished orders by the rule of whoever opened the store (RocksDbOptions::history_expired).
class RetentionFilter : public rocksdb::CompactionFilter {
 public:
  RetentionFilter(Table table, int64_t idempotency_retention_ms, RecordExpiredFn history_expired)
      : table_(table),
        idempotency_retention_ms_(idempotency_retention_ms),
        history_expired_(std::move(history_expired)) {}
  bool Filter(int, const rocksdb::Slice&, const rocksdb::Slice& value, std::string*,
              bool*) const override {
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    if (table_ == Table::kIdempotency) {
      int64_t created_at_ms = 0;
      std::string_view payload;
      if (!DecodeTimestamped(ToView(value), &created_at_ms, &payload)) return false;
      return now_ms - created_at_ms > idempotency_retention_ms_;
    }
    return history_expired_ && history_expired_(table_, ToView(value), now_ms);
  }
  const char* Name() const override { return "feed.RetentionFilter"; }

 private:
  Table table_;
  int64_t idempotency_retention_ms_;
  RecordExpiredFn history_expired_;
};

class RocksWriteGroup : public WriteGroup {
 public:
  explicit RocksWriteGroup(const std::vector<rocksdb::ColumnFamilyHandle*>* cfs) : cfs_(cfs) {}
  void Put(Table t, std::string_view k, std::string_view v) override {
    batch_.Put(cf(t), ToSlice(k), ToSlice(v));
    ++ops_.puts;
  }
  void Delete(Table t, std::string_view k) override {
    batch_.Delete(cf(t), ToSlice(k));
    ++ops_.deletes;
  }
  void DeleteRange(Table t, std::string_view b, std::string_view e) override {
    batch_.DeleteRange(cf(t), ToSlice(b), ToSlice(e));
    ++ops_.range_deletes;
  }
  size_t Count() const override { return batch_.Count(); }
  size_t ByteSize() const override { return batch_.GetDataSize(); }
  OperationCounts Operations() const override { return ops_; }
  void Clear() override {
    batch_.Clear();
    ops_ = {};
  }
  rocksdb::WriteBatch* batch() { return &batch_; }

 private:
  rocksdb::ColumnFamilyHandle* cf(Table t) const { return (*cfs_)[static_cast<int>(t)]; }
  const std::vector<rocksdb::ColumnFamilyHandle*>* cfs_;
  rocksdb::WriteBatch batch_;
  OperationCounts ops_;
};

absl::StatusOr<std::optional<std::string>> GetAt(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                                                 const rocksdb::Snapshot* snapshot,
                                                 std::string_view key) {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db->Get(ro, cf, ToSlice(key), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return ToStatus(s, "get");
  return std::optional<std::string>(value.ToString());
}

absl::Status ScanAt(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                    const rocksdb::Snapshot* snapshot, std::string_view start,
                    std::string_view prefix, const ScanFn& fn) {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  // A whole-table scan (recovery, an unfiltered snapshot) reads every block once: keeping
  // them would evict the hot working set from the block cache.
  ro.fill_cache = !(start.empty() && prefix.empty());
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf));
  std::string_view from = start < prefix ? prefix : start;
  for (it->Seek(ToSlice(from)); it->Valid(); it->Next()) {
    std::string_view key = ToView(it->key());
    if (!prefix.empty() && key.substr(0, prefix.size()) != prefix) break;
    if (!fn(key, ToView(it->value()))) break;
  }
  return ToStatus(it->status(), "scan");
}

class RocksView : public ReadView {
 public:
  RocksView(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>* cfs)
      : db_(db), cfs_(cfs), snapshot_(db->GetSnapshot()) {}
  ~RocksView() override { db_->ReleaseSnapshot(snapshot_); }
  absl::StatusOr<std::optional<std::string>> Get(Table t, std::string_view k) const override {
    return GetAt(db_, (*cfs_)[static_cast<int>(t)], snapshot_, k);
  }
  absl::Status Scan(Table t, std::string_view start, std::string_view prefix,
                    const ScanFn& fn) const override {
    return ScanAt(db_, (*cfs_)[static_cast<int>(t)], snapshot_, start, prefix, fn);
  }

 private:
  rocksdb::DB* db_;
  const std::vector<rocksdb::ColumnFamilyHandle*>* cfs_;
  const rocksdb::Snapshot* snapshot_;
};

class RocksDbStore : public Store {
 public:
  explicit RocksDbStore(const RocksDbOptions& options) : options_(options) {}

  ~RocksDbStore() override {
    if (!db_) return;
    if (options_.read_only) {
      for (auto* cf : cfs_) db_->DestroyColumnFamilyHandle(cf);
      rocksdb::Status s = db_->Close();
      if (!s.ok()) Log()->error("close failed: {}", s.ToString());
      return;
    }
    // Make the WAL durable even in async mode, then close cleanly.
    rocksdb::Status s = db_->FlushWAL(/*sync=*/true);
    if (!s.ok()) Log()->error("FlushWAL at close failed: {}", s.ToString());
    // Write the memtables out too, so the next start has no WAL to replay (up to ~1 s with a
    // full write buffer, bench/RESULTS.md, startup); the WAL above already holds it all.
    rocksdb::FlushOptions flush;
    flush.allow_write_stall = true;
    s = db_->Flush(flush, cfs_);
    if (!s.ok()) Log()->warn("flush at close failed: {}", s.ToString());
    for (auto* cf : cfs_) db_->DestroyColumnFamilyHandle(cf);
    s = db_->Close();
    if (!s.ok()) Log()->error("close failed: {}", s.ToString());
  }

  absl::Status Open() {
    rocksdb::Options db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.IncreaseParallelism(options_.background_threads);
    db_options.max_background_jobs = options_.background_threads;
    db_options.keep_log_file_num = 5;
    db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    // Group commit is ours (one WriteBatch per writer batch), so RocksDB sees one writer
    // most of the time: its pipelined write mode only added hand-offs (measured: 62-69 us of
    // server CPU per unary Reserve without it, 69-78 with it; bench/RESULTS.md).
    db_options.enable_pipelined_write = false;
    // Replayed WAL stays in the memtables at open instead of being flushed to L0 before Open
    // returns (the WAL files are kept until a later flush, so nothing is less durable):
    // a restart after a burst of writes is ready sooner.
    db_options.avoid_flush_during_recovery = true;
    db_options.write_buffer_manager =
        std::make_shared<rocksdb::WriteBufferManager>(options_.memtable_budget_bytes);
    if (options_.simulate_power_loss) {
      power_loss_env_ = rocksdb::NewCompositeEnv(
          internal::NewPowerLossFileSystem(rocksdb::FileSystem::Default()));
      db_options.env = power_loss_env_.get();
    }

    rocksdb::BlockBasedTableOptions table_options;
    table_options.block_cache = rocksdb::NewLRUCache(options_.block_cache_bytes);
    table_options.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10, false));
    // Index and filter blocks live in the block cache, so memory stays within the cache size
    // however much the idempotency table grows on disk (a soak showed RSS creeping up with
    // every new table file otherwise); L0's stay pinned, as they are read the most.
    table_options.cache_index_and_filter_blocks = true;
    table_options.pin_l0_filter_and_index_blocks_in_cache = true;

    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (int i = 0; i < kTableCount; ++i) {
      rocksdb::ColumnFamilyOptions cf_options;
      cf_options.OptimizeLevelStyleCompaction(options_.memtable_budget_bytes);
      cf_options.disable_auto_compactions = options_.defer_compactions;
      cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_options));
      if (Table t = static_cast<Table>(i);
          t == Table::kIdempotency || t == Table::kReservations || t == Table::kOrders) {
        filters_[i] = std::make_unique<RetentionFilter>(t, options_.idempotency_retention_ms,
                                                        options_.history_expired);
        cf_options.compaction_filter = filters_[i].get();
      }
      // Every new idempotency key and client reservation id is looked up first and is
      // almost always absent: a memtable bloom filter answers those misses without walking
      // the skiplist.
      if (static_cast<Table>(i) == Table::kIdempotency ||
          static_cast<Table>(i) == Table::kReservations) {
        cf_options.memtable_prefix_bloom_size_ratio = 0.05;
        cf_options.memtable_whole_key_filtering = true;
      }
      std::string name = i == 0 ? rocksdb::kDefaultColumnFamilyName
                                : std::string(TableName(static_cast<Table>(i)));
      descriptors.emplace_back(name, cf_options);
    }
    // kStock lives in the default column family, so a database is ours only if it has the
    // other six; refuse a foreign database instead of writing into it.
    std::vector<std::string> existing;
    if (rocksdb::DB::ListColumnFamilies(db_options, options_.path, &existing).ok()) {
      for (const auto& name : existing) {
        if (name == kFormat1Outbox) {
          if (!options_.migrate_format_1 || options_.read_only) {
            return absl::FailedPreconditionError(
                "data dir " + options_.path +
                " was written by data format 1 (an outbox table, no journal); this server "
                "reads format " +
                std::to_string(kFormatVersion) +
                ": start it once with --migrate to convert the store (back it up first)");
          }
          descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
          continue;
        }
        bool known = false;
        for (const auto& d : descriptors) known |= d.name == name;
        if (!known) {
          return absl::FailedPreconditionError("data dir " + options_.path +
                                               " holds a database with unknown column family '" +
                                               name + "'; not an inventory feed store");
        }
      }
    }
    rocksdb::DB* db = nullptr;
    rocksdb::Status s =
        options_.read_only
            ? rocksdb::DB::OpenForReadOnly(db_options, options_.path, descriptors, &cfs_, &db)
            : rocksdb::DB::Open(db_options, options_.path, descriptors, &cfs_, &db);
    if (!s.ok()) return ToStatus(s, "open " + options_.path);
    db_.reset(db);
    if (cfs_.size() > static_cast<size_t>(kTableCount)) {
      rocksdb::ColumnFamilyHandle* outbox = cfs_.back();
      cfs_.pop_back();
      return MigrateFormat1(outbox);
    }
    return absl::OkStatus();
  }

  // Format 1 -> 2 (RocksDbOptions::migrate_format_1). Idempotent until the outbox is dropped.
  absl::Status MigrateFormat1(rocksdb::ColumnFamilyHandle* outbox) {
    auto cursor = ReadMetaSequence(*this, meta_keys::kRelayCursor);
    auto next = ReadMetaSequence(*this, meta_keys::kNextSequence);
    if (!cursor.ok()) return cursor.status();
    if (!next.ok()) return next.status();
    const uint64_t from = cursor->value_or(0);
    const uint64_t last = next->value_or(1) - 1;
    rocksdb::WriteOptions sync;
    sync.sync = true;
    rocksdb::WriteBatch batch;
    uint64_t moved = 0;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), outbox));
    const std::string start = EncodeSequence(from);
    for (it->Seek(start); it->Valid(); it->Next()) {
      auto seq = DecodeSequence(std::string_view(it->key().data(), it->key().size()));
      if (!seq) return absl::DataLossError("migration: an outbox key is not a sequence");
      const std::string entry =
          options_.migrate_format_1(*seq, std::string_view(it->value().data(), it->value().size()));
      batch.Put(cfs_[static_cast<int>(Table::kJournal)], it->key(), entry);
      if (++moved % 10000 == 0) {
        if (auto s = ToStatus(db_->Write(sync, &batch), "migration"); !s.ok()) return s;
        batch.Clear();
      }
    }
    if (auto s = ToStatus(it->status(), "migration: outbox scan"); !s.ok()) return s;
    it.reset();
    auto* meta_cf = cfs_[static_cast<int>(Table::kMeta)];
    batch.Put(meta_cf, std::string(meta_keys::kCheckpointSequence), EncodeSequence(last));
    batch.Put(meta_cf, std::string(meta_keys::kFormatVersion), EncodeSequence(kFormatVersion));
    if (auto s = ToStatus(db_->Write(sync, &batch), "migration"); !s.ok()) return s;
    if (auto s = ToStatus(db_->DropColumnFamily(outbox), "migration: drop the outbox"); !s.ok()) {
      return s;
    }
    db_->DestroyColumnFamilyHandle(outbox);
    Log()->warn(
        "migrated {} from data format 1 to {}: {} undelivered outbox events (from sequence {}) "
        "are journal entries now; the tables are checkpointed up to sequence {}",
        options_.path, kFormatVersion, moved, from, last);
    return absl::OkStatus();
  }

  MemoryUsage memory_usage() const override {
    MemoryUsage m;
    uint64_t v = 0;
    if (db_->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &v)) m.memtables_bytes = v;
    if (db_->GetIntProperty("rocksdb.block-cache-usage", &v)) m.block_cache_bytes = v;
    if (db_->GetAggregatedIntProperty("rocksdb.estimate-table-readers-mem", &v)) {
      m.table_readers_bytes = v;
    }
    return m;
  }

  size_t ApproximateCount(Table t) const override {
    uint64_t n = 0;
    return db_->GetIntProperty(cfs_[static_cast<int>(t)], "rocksdb.estimate-num-keys", &n) ? n : 0;
  }

  uint64_t ApproximateBytes(Table t) const override {
    uint64_t live = 0, memtables = 0;
    auto* cf = cfs_[static_cast<int>(t)];
    (void)db_->GetIntProperty(cf, "rocksdb.estimate-live-data-size", &live);
    (void)db_->GetIntProperty(cf, "rocksdb.cur-size-all-mem-tables", &memtables);
    return live + memtables;
  }

  void StartCompactions() override {
    if (!options_.defer_compactions || compactions_started_.exchange(true)) return;
    rocksdb::Status s = db_->EnableAutoCompaction(cfs_);
    if (!s.ok()) Log()->error("turning on compactions failed: {}", s.ToString());
  }

  absl::Status CompactAll() override {
    rocksdb::CompactRangeOptions options;
    // Rewrite the last level too, so that every record meets the retention filters.
    options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    for (auto* cf : cfs_) {
      rocksdb::Status s = db_->CompactRange(options, cf, nullptr, nullptr);
      if (!s.ok()) return ToStatus(s, "compact " + cf->GetName());
    }
    return absl::OkStatus();
  }

  absl::Status CreateCheckpoint(const std::string& dir) override {
    rocksdb::Checkpoint* raw = nullptr;
    rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
    if (!s.ok()) return ToStatus(s, "checkpoint");
    std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
    // 0: flush the memtables first, so the copy is SST files (hard links) and a short WAL.
    return ToStatus(checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0),
                    "checkpoint into " + dir);
  }

  std::unique_ptr<WriteGroup> NewWriteGroup() override {
    return std::make_unique<RocksWriteGroup>(&cfs_);
  }

  absl::Status Commit(WriteGroup& group, CommitMode mode) override {
    rocksdb::WriteOptions wo;
    wo.sync = mode == CommitMode::kConfigured && options_.durability == Durability::kSync;
    absl::Status s =
        ToStatus(db_->Write(wo, static_cast<RocksWriteGroup&>(group).batch()), "write");
    if (s.ok()) written_.AddCommit(group.Operations());
    return s;
  }
  WriteCounts write_counts() const override { return written_.Get(); }

  std::unique_ptr<ReadView> Snapshot() const override {
    return std::make_unique<RocksView>(db_.get(), &cfs_);
  }
  Durability durability() const override { return options_.durability; }

  absl::StatusOr<std::optional<std::string>> Get(Table t, std::string_view k) const override {
    return GetAt(db_.get(), cfs_[static_cast<int>(t)], nullptr, k);
  }
  absl::Status Scan(Table t, std::string_view start, std::string_view prefix,
                    const ScanFn& fn) const override {
    return ScanAt(db_.get(), cfs_[static_cast<int>(t)], nullptr, start, prefix, fn);
  }

 private:
  RocksDbOptions options_;
  std::unique_ptr<rocksdb::CompactionFilter> filters_[kTableCount];  // outlive db_
  std::unique_ptr<rocksdb::Env> power_loss_env_;  // outlives db_ (declared first)
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_;
  std::atomic<bool> compactions_started_{false};
  WriteCountsTotal written_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const RocksDbOptions& options) {
  auto store = std::make_unique<RocksDbStore>(options);
  if (absl::Status s = store->Open(); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace feed::storage

// The storage seam: an ordered key-value store with tables, atomic write groups and
// point-in-time views. RocksDB implements it (rocksdb_store.h); a map-backed fake
// (memory_store.h) serves unit tests and in-memory benchmarks of the core.
//
// Thread safety: every method may be called from any thread. A WriteGroup is owned by one
// thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace feed::storage {

// One RocksDB column family each. The tables other than kJournal and kMeta hold the state as
// of the last checkpoint (meta checkpoint_sequence); the journal entries after it hold the
// rest (the core's checkpointer moves them into the tables; recovery replays them).
enum class Table : int {
  kStock = 0,     // (sku, location) -> inventory.v1.StockLevel
  kHolds,         // reservation id -> inventory.v1.Reservation, HELD ones only
  kReservations,  // reservation id -> inventory.v1.Reservation, closed ones
  kOrders,        // order id -> order.v1.Order
  kIdempotency,   // method/key -> timestamped feed.internal.v1.IdempotencyRecord
  kJournal,       // big-endian last sequence -> feed.internal.v1.JournalEntry (one per
                  // committed batch: the outbox and the recovery log at once)
  kMeta,          // named counters and cursors (meta_keys below)
};
inline constexpr int kTableCount = 7;
std::string_view TableName(Table table);

enum class Durability {
  kSync,   // the WAL is fsynced before Commit returns: survives power loss
  kAsync,  // the WAL is written but not fsynced: survives a process crash only
};

// Whether a commit follows the store's durability mode or never syncs (the relay's
// bookkeeping, which at worst causes a redelivery).
enum class CommitMode { kConfigured, kNoSync };

class WriteGroup {
 public:
  virtual ~WriteGroup() = default;
  virtual void Put(Table table, std::string_view key, std::string_view value) = 0;
  virtual void Delete(Table table, std::string_view key) = 0;
  // Deletes every key in [begin, end).
  virtual void DeleteRange(Table table, std::string_view begin, std::string_view end) = 0;
  virtual size_t Count() const = 0;
  virtual size_t ByteSize() const = 0;
  // Operations of each kind added since the last Clear (the store's write counts).
  struct OperationCounts {
    uint64_t puts = 0;
    uint64_t deletes = 0;
    uint64_t range_deletes = 0;
  };
  virtual OperationCounts Operations() const = 0;
  virtual void Clear() = 0;
};

// Called for each entry in key order; return false to stop.
using ScanFn = std::function<bool(std::string_view key, std::string_view value)>;

class ReadView {
 public:
  virtual ~ReadView() = default;
  virtual absl::StatusOr<std::optional<std::string>> Get(Table table,
                                                         std::string_view key) const = 0;
  // Entries with key >= start that begin with prefix (empty prefix: no bound), in order.
  virtual absl::Status Scan(Table table, std::string_view start, std::string_view prefix,
                            const ScanFn& fn) const = 0;
};

class Store : public ReadView {
 public:
  virtual std::unique_ptr<WriteGroup> NewWriteGroup() = 0;
  // Applies every operation of the group atomically: all or nothing, even across a crash.
  virtual absl::Status Commit(WriteGroup& group, CommitMode mode = CommitMode::kConfigured) = 0;
  // A consistent point-in-time view of every table.
  virtual std::unique_ptr<ReadView> Snapshot() const = 0;
  virtual Durability durability() const = 0;

  // What the engine holds in memory, for the metrics (zeros where it does not say).
  struct MemoryUsage {
    size_t memtables_bytes = 0;
    size_t block_cache_bytes = 0;    // data, index and filter blocks cached
    size_t table_readers_bytes = 0;  // index and filter blocks outside the cache
  };
  virtual MemoryUsage memory_usage() const { return {}; }
  // Operations of every group committed so far, and how many commits carried them: what each
  // command costs the engine (every record is also flushed and compacted later).
  struct WriteCounts {
    uint64_t commits = 0;
    uint64_t puts = 0;
    uint64_t deletes = 0;
    uint64_t range_deletes = 0;
  };
  virtual WriteCounts write_counts() const { return {}; }
  // Roughly how many keys `table` holds (0 when unknown): sizes in-memory indexes before a
  // full scan, so a large recovery does not rehash them again and again.
  virtual size_t ApproximateCount(Table table) const { return 0; }
  // Roughly how many bytes `table` takes (0 when unknown): what the journal's size bound reads.
  virtual uint64_t ApproximateBytes(Table table) const { return 0; }
  // Turns on the automatic compactions of a store opened with them deferred (see
  // RocksDbOptions::defer_compactions); a no-op otherwise and when called again.
  virtual void StartCompactions() {}
  // Compacts every table now, so that records past their retention are dropped at once
  // instead of whenever a compaction reaches them (tests, maintenance); a no-op where the
  // engine has no compactions.
  virtual absl::Status CompactAll() { return absl::OkStatus(); }
  // A consistent point-in-time copy of every table into `dir` (which must not exist), as a
  // store of the same engine that can be opened on its own. The writers go on meanwhile.
  virtual absl::Status CreateCheckpoint(const std::string& dir) {
    return absl::UnimplementedError("this store cannot make checkpoints");
  }
};

// Running totals behind Store::write_counts, safe to read from any thread.
class WriteCountsTotal {
 public:
  void AddCommit(const WriteGroup::OperationCounts& ops) {
    commits_.fetch_add(1, std::memory_order_relaxed);
    puts_.fetch_add(ops.puts, std::memory_order_relaxed);
    deletes_.fetch_add(ops.deletes, std::memory_order_relaxed);
    range_deletes_.fetch_add(ops.range_deletes, std::memory_order_relaxed);
  }
  Store::WriteCounts Get() const {
    return {commits_.load(std::memory_order_relaxed), puts_.load(std::memory_order_relaxed),
            deletes_.load(std::memory_order_relaxed),
            range_deletes_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<uint64_t> commits_{0}, puts_{0}, deletes_{0}, range_deletes_{0};
};

// Key and value encodings shared by the writer and the relay.
std::string EncodeSequence(uint64_t sequence);  // 8 bytes, big-endian: sorts numerically
std::optional<uint64_t> DecodeSequence(std::string_view bytes);
// A sequence-valued meta record (meta_keys below): nothing when absent, DATA_LOSS naming it
// when it is not 8 bytes.
absl::StatusOr<std::optional<uint64_t>> ReadMetaSequence(const ReadView& view,
                                                         std::string_view name);

// Values of Table::kIdempotency start with an 8-byte big-endian creation time (ms since the
// epoch) so that the store can drop expired records during compaction.
std::string EncodeTimestamped(int64_t created_at_ms, std::string_view payload);
bool DecodeTimestamped(std::string_view value, int64_t* created_at_ms, std::string_view* payload);

namespace meta_keys {
// The next sequence as of the last checkpoint (EncodeSequence); the journal may be ahead.
inline constexpr std::string_view kNextSequence = "next_sequence";
inline constexpr std::string_view kStoreId = "store_id";          // 16 hex chars
inline constexpr std::string_view kRelayCursor = "relay_cursor";  // EncodeSequence: next to send
// The last sequence whose batch the tables include (EncodeSequence); absent: 0.
inline constexpr std::string_view kCheckpointSequence = "checkpoint_sequence";
// The store's data format (EncodeSequence); see kFormatVersion.
inline constexpr std::string_view kFormatVersion = "format_version";
// Cluster mode: the shard log's offset of the newest journal entry the store holds
// (EncodeSequence); the log is read again from the next one.
inline constexpr std::string_view kShardLogOffset = "shard_log_offset";
// Cluster mode: the newest accepted claim of the shard as of that offset (a serialized
// feed.internal.v1.ShardLogRecord whose epoch and node are the owner's), so that a restart
// judges the records after the offset as every other node does.
inline constexpr std::string_view kShardLogOwner = "shard_log_owner";
}  // namespace meta_keys

// The data format this build writes and reads: 3 = a reservation whose id Reserve derived
// from its idempotency key carries that key's record (feed.internal.v1.ReservationKeyRecord)
// instead of one in the idempotency table. Format 2 (tables checkpointed from a journal, every
// key in that table) is read as it is and marked 3 at the first start. (Format 1 had an
// "outbox" table of single events and no format_version record.)
inline constexpr uint64_t kFormatVersion = 3;

}  // namespace feed::storage

// One node's copy of one shard, kept by reading the shard's log (docs/CLUSTER.md): every
// record goes through the ShardLedger, and the batches it finds valid are handed to `apply`
// in log order. The same object takes the shard over (Claim) and, while this node owns it,
// appends batches with the acknowledgement point (Append): a batch counts only once it has
// been read back valid, so an answer given after Append returned OK survives any failover.
//
// Not thread-safe: one thread (a standby's applier, or the replicator of the owner's core)
// drives it; StartAppend alone may run on another thread (the owner's committer).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "bridge/shard_log.h"
#include "cluster/shard_ledger.h"

namespace feed::cluster {

struct NodeIdentity {
  std::string node_id;  // stable across restarts (also the consumer group's instance id)
  std::string address;  // host:port of its gRPC server
};

struct ShardReplicaStats {
  uint64_t applied = 0;    // valid batches applied
  uint64_t fenced = 0;     // batches ignored: written under a claim that was not current
  uint64_t claims = 0;     // accepted claims read
  uint64_t malformed = 0;  // records that are not ShardLogRecords, or have no body
};

class ShardReplica {
 public:
  // A valid batch's journal entry and its offset. `own`: appended under the claim this
  // replica is confirming appends for (its core stores those itself). An error stops the replica
  // (the entry does not decode, the store fails): the call that read the record returns it.
  using ApplyBatch =
      std::function<absl::Status(std::string_view journal_entry, int64_t offset, bool own)>;
  // An accepted claim (ShardOwner::claim_offset is its offset); errors as for ApplyBatch.
  using ApplyClaim = std::function<absl::Status(const ShardOwner& owner)>;

  // `reader` follows this shard's partition from `start`: the first record not applied yet
  // and the owner as of the record before it (ShardLogPosition, shard_store.h).
  ShardReplica(int32_t shard, NodeIdentity self, bridge::ShardLogWriter& writer,
               std::unique_ptr<bridge::ShardLogReader> reader, int64_t next_offset,
               ShardOwner owner, ApplyBatch apply, ApplyClaim apply_claim = nullptr);

  // Reads and applies what the log holds now (up to its end when called).
  absl::Status CatchUp(int64_t timeout_ms);
  // Applies what has arrived, waiting up to `timeout_ms` for the first record: a standby's
  // step (no round trip to the broker for the log's end).
  absl::Status ApplyArrived(int64_t timeout_ms);
  // Takes the shard over: appends a claim one epoch above the newest it has read and reads up
  // to it. OK: this node owns the shard from that record on. ABORTED, naming the owner: a
  // newer claim won the race.
  absl::Status Claim(int64_t now_ms, int64_t timeout_ms);
  // The acknowledgement point: appends `journal_entry` under this node's claim and reads up
  // to it. OK: the batch is valid for every reader. ABORTED: another node has claimed the
  // shard (this node is a zombie); FAILED_PRECONDITION: it does not own the shard;
  // UNAVAILABLE / DEADLINE_EXCEEDED: the log did not take or return it in time. Any error
  // leaves the batch in doubt for the caller, never lost for a reader that found it valid.
  absl::Status Append(std::string_view journal_entry, int64_t timeout_ms);
  // Append for several entries at once (one round trip): their offsets, in order, once every
  // one is valid; the errors of Append otherwise.
  absl::StatusOr<std::vector<int64_t>> AppendAll(const std::vector<std::string_view>& entries,
                                                 int64_t timeout_ms);

  // AppendAll in two steps, so that several rounds can be on their way at once. StartAppend
  // sends the entries as batches of `claim` (the claim this node serves under: owner() right
  // after Claim) and returns at once; any thread, rounds enter the log in call order.
  // ConfirmAppend waits for the round's offsets and reads the log up to them: the replica's
  // thread, rounds in start order; its result is AppendAll's.
  class PendingAppend;
  std::shared_ptr<PendingAppend> StartAppend(const ShardOwner& claim,
                                             const std::vector<std::string_view>& entries);
  absl::StatusOr<std::vector<int64_t>> ConfirmAppend(PendingAppend& pending, int64_t timeout_ms);

  int32_t shard() const { return shard_; }
  const ShardLedger& ledger() const { return ledger_; }
  bool owned() const { return ledger_.OwnedBy(self_.node_id); }
  // The offset of the first record not read yet.
  int64_t next_offset() const { return next_offset_; }
  const ShardReplicaStats& stats() const { return stats_; }

 private:
  using Observer = std::function<void(int64_t offset, Verdict verdict)>;
  // Reads records until offset `end` (exclusive) has been applied, telling `observe` (when
  // set) every record's verdict.
  absl::Status ReadTo(int64_t end, int64_t timeout_ms, const Observer& observe = nullptr);
  // Applies one poll's records.
  absl::Status ApplyRecords(std::vector<bridge::LoggedRecord>& records, const Observer& observe);
  // A valid batch appended under the claim being confirmed (its core has it).
  bool Own(const internal::v1::ShardLogRecord& record) const;
  // Appends the records in order (one round trip); their offsets.
  absl::StatusOr<std::vector<int64_t>> AppendRecords(
      const std::vector<internal::v1::ShardLogRecord>& records);

  const int32_t shard_;
  const NodeIdentity self_;
  bridge::ShardLogWriter& writer_;
  const std::unique_ptr<bridge::ShardLogReader> reader_;
  const ApplyBatch apply_;
  const ApplyClaim apply_claim_;
  ShardLedger ledger_;
  // Once appends are confirmed: the claim they were made under (what `own` means), and the
  // offset of the first newer claim read after it (every later batch of ours is fenced).
  std::optional<ShardOwner> serving_;
  int64_t lost_at_ = INT64_MAX;
  int64_t next_offset_;
  ShardReplicaStats stats_;
};

}  // namespace feed::cluster

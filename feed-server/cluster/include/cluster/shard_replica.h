// One node's copy of one shard, kept by reading the shard's log (docs/CLUSTER.md): every
// record goes through the ShardLedger, and the batches it finds valid are handed to `apply`
// in log order. The same object takes the shard over (Claim) and, while this node owns it,
// appends batches with the acknowledgement point (Append): a batch counts only once it has
// been read back valid, so an answer given after Append returned OK survives any failover.
//
// Not thread-safe: one thread (a standby's applier, or the committer of the owner) drives it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

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
  // A valid batch's journal entry and its offset; an error stops the replica (the entry does
  // not decode, the store fails): it is returned by the call that read the record.
  using ApplyBatch = std::function<absl::Status(std::string_view journal_entry, int64_t offset)>;

  // `reader` follows this shard's partition from the first record not yet applied.
  ShardReplica(int32_t shard, NodeIdentity self, bridge::ShardLogWriter& writer,
               std::unique_ptr<bridge::ShardLogReader> reader, int64_t next_offset,
               ApplyBatch apply);

  // Reads and applies what the log holds now (up to its end when called).
  absl::Status CatchUp(int64_t timeout_ms);
  // Takes the shard over: appends a claim one epoch above the newest it has read and reads up
  // to it. OK: this node owns the shard from that record on. ABORTED, naming the owner: a
  // newer claim won the race.
  absl::Status Claim(int64_t now_ms, int64_t timeout_ms);
  // The acknowledgement point: appends `journal_entry` under this node's claim and reads up
  // to it. OK: the batch is valid for every reader. ABORTED: another node has claimed the
  // shard (this node is a zombie); FAILED_PRECONDITION: it does not own the shard;
  // UNAVAILABLE / DEADLINE_EXCEEDED: the log did not take or return it in time. Any error
  // leaves the batch in doubt for the caller, never lost for a reader that found it valid.
  absl::Status Append(std::string journal_entry, int64_t timeout_ms);

  int32_t shard() const { return shard_; }
  const ShardLedger& ledger() const { return ledger_; }
  bool owned() const { return ledger_.OwnedBy(self_.node_id); }
  // The offset of the first record not read yet.
  int64_t next_offset() const { return next_offset_; }
  const ShardReplicaStats& stats() const { return stats_; }

 private:
  // Reads records until offset `end` (exclusive) has been applied; the verdict of the record
  // at `watched`, when it is among them, goes to *watched_verdict.
  absl::Status ReadTo(int64_t end, int64_t timeout_ms, int64_t watched = -1,
                      Verdict* watched_verdict = nullptr);
  absl::StatusOr<int64_t> AppendRecord(const internal::v1::ShardLogRecord& record);

  const int32_t shard_;
  const NodeIdentity self_;
  bridge::ShardLogWriter& writer_;
  const std::unique_ptr<bridge::ShardLogReader> reader_;
  const ApplyBatch apply_;
  ShardLedger ledger_;
  int64_t next_offset_;
  ShardReplicaStats stats_;
};

}  // namespace feed::cluster

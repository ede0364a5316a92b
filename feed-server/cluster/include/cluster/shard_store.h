// A node's store of one shard in cluster mode, and how it meets the shard's log.
//
// A standby keeps the shard's valid journal entries in its own store exactly as the owner's
// committer stored them (Table::kJournal under the entry's last sequence), with the log offset
// of the newest in the same commit (meta shard_log_offset). Opening an InventoryCore on that
// store replays them (core recovery), so taking over needs no conversion; the node folds them
// into the store's tables at every checkpoint interval (core/journal_checkpoint.h), so that a
// takeover replays only the entries since. The owner's core
// writes the same two records itself (core/replicated_log.h). Accepted claims are stored too,
// so a node that restarts, owner or not, resumes reading the log after its store's offset
// and judges the records there as every other node does.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/shard_replica.h"
#include "core/replicated_log.h"
#include "storage/store.h"

namespace feed::cluster {

// Stores a valid entry read at `offset`. DATA_LOSS when the bytes are not a journal entry
// with events. No WAL sync: the log holds it, and a restart reads it again after the offset.
absl::Status StoreLoggedEntry(storage::Store& store, std::string_view journal_entry,
                              int64_t offset);

// Stores an accepted claim read at owner.claim_offset: the owner as of that offset.
absl::Status StoreClaim(storage::Store& store, const ShardOwner& owner);

// Where the store stands in the shard's log: the first offset it does not hold yet and the
// owner as of the offset before (a new store: 0 and nobody). What a ShardReplica resumes from.
struct ShardLogPosition {
  int64_t next_offset = 0;
  ShardOwner owner;
};
absl::StatusOr<ShardLogPosition> LoadShardLogPosition(const storage::ReadView& store);

// The core's ReplicatedLog over a ShardReplica this node owns: each round of batches is one
// StartAppend (committer thread) and ConfirmAppend (replicator thread): the acknowledgement
// point. `claim` is the one the node took the shard with; the core's threads are the
// replica's only users while the core runs.
class ShardLogReplication final : public core::ReplicatedLog {
 public:
  ShardLogReplication(ShardReplica& replica, ShardOwner claim, int64_t timeout_ms)
      : replica_(replica), claim_(std::move(claim)), timeout_ms_(timeout_ms) {}

  std::unique_ptr<Round> Start(const std::vector<std::string_view>& journal_entries) override {
    return std::make_unique<PendingRound>(replica_, replica_.StartAppend(claim_, journal_entries),
                                          timeout_ms_);
  }

 private:
  class PendingRound final : public Round {
   public:
    PendingRound(ShardReplica& replica, std::shared_ptr<ShardReplica::PendingAppend> pending,
                 int64_t timeout_ms)
        : replica_(replica), pending_(std::move(pending)), timeout_ms_(timeout_ms) {}
    absl::StatusOr<std::vector<int64_t>> Confirmed() override {
      return replica_.ConfirmAppend(*pending_, timeout_ms_);
    }

   private:
    ShardReplica& replica_;
    const std::shared_ptr<ShardReplica::PendingAppend> pending_;
    const int64_t timeout_ms_;
  };

  ShardReplica& replica_;
  const ShardOwner claim_;
  const int64_t timeout_ms_;
};

}  // namespace feed::cluster

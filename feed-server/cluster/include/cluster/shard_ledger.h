// The apply rule of a shard's log (docs/CLUSTER.md, "Fencing without Kafka transactions").
// Every node reads shard s's partition through one ShardLedger, so every node reaches the
// same verdict on every record:
//
//   - a claim is accepted when its epoch is above the newest accepted claim's; its node owns
//     the shard from that record on. A claim at or below it lost a race and changes nothing.
//   - a batch is valid when it carries the newest accepted claim's epoch and node. Anything
//     else (an old owner that has not seen the new claim yet: a zombie) is fenced: no reader
//     applies it, its writer included once it reads it back.
//
// Nothing else is needed from Kafka than the order of one partition: no transactions.
#pragma once

#include <cstdint>
#include <string>

#include "internal/v1/shard_log.pb.h"

namespace feed::cluster {

// A shard's owner as its log stands so far.
struct ShardOwner {
  uint64_t epoch = 0;  // 0: never claimed, nobody may write
  std::string node_id;
  std::string address;
  int64_t claim_offset = -1;

  bool claimed() const { return epoch != 0; }
};

enum class Verdict {
  kClaimAccepted,  // the record's node owns the shard from here on
  kClaimRejected,  // an epoch not above the owner's: a lost race, ignored
  kBatchValid,     // written by the owner under its claim: apply it
  kBatchFenced,    // written under another claim (a zombie's): ignore it
  kMalformed,      // neither claim nor batch: ignored (a newer format's record)
};

const char* VerdictName(Verdict verdict);

class ShardLedger {
 public:
  ShardLedger() = default;
  // A reader resuming mid-log: the owner as of the record before.
  explicit ShardLedger(ShardOwner owner) : owner_(std::move(owner)) {}

  // The record found at `offset`, in log order.
  Verdict Apply(const internal::v1::ShardLogRecord& record, int64_t offset);

  const ShardOwner& owner() const { return owner_; }
  // The epoch a node claiming the shard now writes: one above the newest it has read.
  uint64_t next_epoch() const { return owner_.epoch + 1; }
  // Whether `node_id` may write now, as far as this reader has read.
  bool OwnedBy(std::string_view node_id) const {
    return owner_.claimed() && owner_.node_id == node_id;
  }

 private:
  ShardOwner owner_;
};

// The claim record `node_id` appends to take over a shard whose log it has read into `ledger`.
internal::v1::ShardLogRecord MakeClaim(const ShardLedger& ledger, std::string node_id,
                                       std::string address, int64_t now_ms);
// A batch record written under `owner`'s claim.
internal::v1::ShardLogRecord MakeBatch(const ShardOwner& owner, std::string journal_entry);

}  // namespace feed::cluster

#include "cluster/shard_ledger.h"

namespace feed::cluster {

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kClaimAccepted:
      return "claim accepted";
    case Verdict::kClaimRejected:
      return "claim rejected";
    case Verdict::kBatchValid:
      return "batch valid";
    case Verdict::kBatchFenced:
      return "batch fenced";
    case Verdict::kMalformed:
      return "malformed";
  }
  return "unknown";
}

Verdict ShardLedger::Apply(const internal::v1::ShardLogRecord& record, int64_t offset) {
  switch (record.body_case()) {
    case internal::v1::ShardLogRecord::kClaim:
      if (record.epoch() <= owner_.epoch || record.node_id().empty()) {
        return Verdict::kClaimRejected;
      }
      owner_ = ShardOwner{record.epoch(), record.node_id(), record.claim().address(), offset};
      return Verdict::kClaimAccepted;
    case internal::v1::ShardLogRecord::kJournalEntry:
      // The node as well as the epoch: two claimants of one epoch cannot both write, even
      // if the loser of the race failed to notice it lost.
      return owner_.claimed() && record.epoch() == owner_.epoch &&
                     record.node_id() == owner_.node_id
                 ? Verdict::kBatchValid
                 : Verdict::kBatchFenced;
    case internal::v1::ShardLogRecord::BODY_NOT_SET:
      break;
  }
  return Verdict::kMalformed;
}

internal::v1::ShardLogRecord MakeClaim(const ShardLedger& ledger, std::string node_id,
                                       std::string address, int64_t now_ms) {
  internal::v1::ShardLogRecord record;
  record.set_epoch(ledger.next_epoch());
  record.set_node_id(std::move(node_id));
  record.mutable_claim()->set_address(std::move(address));
  record.mutable_claim()->set_claimed_at_ms(now_ms);
  return record;
}

internal::v1::ShardLogRecord MakeBatch(const ShardOwner& owner, std::string journal_entry) {
  internal::v1::ShardLogRecord record;
  record.set_epoch(owner.epoch);
  record.set_node_id(owner.node_id);
  record.set_journal_entry(std::move(journal_entry));
  return record;
}

}  // namespace feed::cluster

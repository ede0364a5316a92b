#include "cluster/shard_replica.h"

#include <chrono>

#include "fmt/format.h"

namespace feed::cluster {
namespace {

using Clock = std::chrono::steady_clock;

int64_t RemainingMs(Clock::time_point deadline) {
  return std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
}

}  // namespace

ShardReplica::ShardReplica(int32_t shard, NodeIdentity self, bridge::ShardLogWriter& writer,
                           std::unique_ptr<bridge::ShardLogReader> reader, int64_t next_offset,
                           ApplyBatch apply)
    : shard_(shard),
      self_(std::move(self)),
      writer_(writer),
      reader_(std::move(reader)),
      apply_(std::move(apply)),
      next_offset_(next_offset) {}

absl::Status ShardReplica::CatchUp(int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto end = reader_->EndOffset(shard_, timeout_ms);
  if (!end.ok()) return end.status();
  return ReadTo(*end, RemainingMs(deadline));
}

absl::Status ShardReplica::Claim(int64_t now_ms, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // From the newest epoch there is: a claim from a stale view would lose for nothing.
  if (absl::Status caught_up = CatchUp(timeout_ms); !caught_up.ok()) return caught_up;
  auto offset = AppendRecord(MakeClaim(ledger_, self_.node_id, self_.address, now_ms));
  if (!offset.ok()) return offset.status();
  Verdict verdict = Verdict::kMalformed;
  if (absl::Status read = ReadTo(*offset + 1, RemainingMs(deadline), *offset, &verdict);
      !read.ok()) {
    return read;
  }
  if (verdict != Verdict::kClaimAccepted || !owned()) {
    return absl::AbortedError(fmt::format("shard {}: claimed by {} at epoch {} first", shard_,
                                          ledger_.owner().node_id, ledger_.owner().epoch));
  }
  return absl::OkStatus();
}

absl::Status ShardReplica::Append(std::string journal_entry, int64_t timeout_ms) {
  if (!owned()) {
    return absl::FailedPreconditionError(fmt::format("shard {}: owned by {} at epoch {}, not by {}",
                                                     shard_, ledger_.owner().node_id,
                                                     ledger_.owner().epoch, self_.node_id));
  }
  const uint64_t epoch = ledger_.owner().epoch;
  auto offset = AppendRecord(MakeBatch(ledger_.owner(), std::move(journal_entry)));
  if (!offset.ok()) return offset.status();
  Verdict verdict = Verdict::kMalformed;
  if (absl::Status read = ReadTo(*offset + 1, timeout_ms, *offset, &verdict); !read.ok()) {
    return read;
  }
  if (verdict != Verdict::kBatchValid) {
    return absl::AbortedError(fmt::format(
        "shard {}: batch at offset {} fenced: {} claimed the shard at epoch {} (ours was {})",
        shard_, *offset, ledger_.owner().node_id, ledger_.owner().epoch, epoch));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ShardReplica::AppendRecord(const internal::v1::ShardLogRecord& record) {
  return writer_.AppendAndWait(shard_, record.SerializeAsString());
}

absl::Status ShardReplica::ReadTo(int64_t end, int64_t timeout_ms, int64_t watched,
                                  Verdict* watched_verdict) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (next_offset_ < end) {
    const int64_t left = RemainingMs(deadline);
    if (left == 0) {
      return absl::DeadlineExceededError(fmt::format(
          "shard {}: log read to offset {} of {} in {} ms", shard_, next_offset_, end, timeout_ms));
    }
    auto records = reader_->Poll(left, 1024);
    if (!records.ok()) return records.status();
    for (bridge::LoggedRecord& logged : *records) {
      if (logged.shard != shard_ || logged.offset < next_offset_) continue;
      internal::v1::ShardLogRecord record;
      const Verdict verdict = record.ParseFromString(logged.value)
                                  ? ledger_.Apply(record, logged.offset)
                                  : Verdict::kMalformed;
      if (logged.offset == watched && watched_verdict != nullptr) *watched_verdict = verdict;
      switch (verdict) {
        case Verdict::kBatchValid:
          if (absl::Status applied = apply_(record.journal_entry(), logged.offset); !applied.ok()) {
            return applied;
          }
          ++stats_.applied;
          break;
        case Verdict::kBatchFenced:
          ++stats_.fenced;
          break;
        case Verdict::kClaimAccepted:
          ++stats_.claims;
          break;
        case Verdict::kMalformed:
          ++stats_.malformed;
          break;
        case Verdict::kClaimRejected:
          break;
      }
      next_offset_ = logged.offset + 1;  // after a failed apply, the record is read again
    }
  }
  return absl::OkStatus();
}

}  // namespace feed::cluster

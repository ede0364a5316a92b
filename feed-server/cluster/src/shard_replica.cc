#include "cluster/shard_replica.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

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
                           ShardOwner owner, ApplyBatch apply, ApplyClaim apply_claim)
    : shard_(shard),
      self_(std::move(self)),
      writer_(writer),
      reader_(std::move(reader)),
      apply_(std::move(apply)),
      apply_claim_(std::move(apply_claim)),
      ledger_(std::move(owner)),
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
  auto offsets = AppendRecords({MakeClaim(ledger_, self_.node_id, self_.address, now_ms)});
  if (!offsets.ok()) return offsets.status();
  const int64_t claim_offset = offsets->front();
  Verdict verdict = Verdict::kMalformed;
  if (absl::Status read = ReadTo(claim_offset + 1, RemainingMs(deadline),
                                 [&](int64_t offset, Verdict v) {
                                   if (offset == claim_offset) verdict = v;
                                 });
      !read.ok()) {
    return read;
  }
  if (verdict != Verdict::kClaimAccepted || !owned()) {
    return absl::AbortedError(fmt::format("shard {}: claimed by {} at epoch {} first", shard_,
                                          ledger_.owner().node_id, ledger_.owner().epoch));
  }
  return absl::OkStatus();
}

absl::Status ShardReplica::Append(std::string_view journal_entry, int64_t timeout_ms) {
  return AppendAll({journal_entry}, timeout_ms).status();
}

absl::StatusOr<std::vector<int64_t>> ShardReplica::AppendAll(
    const std::vector<std::string_view>& entries, int64_t timeout_ms) {
  if (!owned()) {
    return absl::FailedPreconditionError(fmt::format("shard {}: owned by {} at epoch {}, not by {}",
                                                     shard_, ledger_.owner().node_id,
                                                     ledger_.owner().epoch, self_.node_id));
  }
  return ConfirmAppend(*StartAppend(ledger_.owner(), entries), timeout_ms);
}

// The offsets of one round, filled in by the producer's delivery reports (shared with them:
// a round dropped unconfirmed must not leave them writing into freed memory).
class ShardReplica::PendingAppend {
 public:
  PendingAppend(ShardOwner claim, size_t records)
      : claim_(std::move(claim)), left_(records), offsets_(records) {}

  void Delivered(size_t i, absl::StatusOr<int64_t> offset) {
    std::lock_guard lock(mu_);
    offsets_[i] = std::move(offset);
    if (--left_ == 0) cv_.notify_all();
  }
  absl::StatusOr<std::vector<int64_t>> Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return left_ == 0; });
    std::vector<int64_t> offsets;
    offsets.reserve(offsets_.size());
    for (auto& offset : offsets_) {
      if (!offset.ok()) return offset.status();
      offsets.push_back(*offset);
    }
    return offsets;
  }
  const ShardOwner& claim() const { return claim_; }

 private:
  const ShardOwner claim_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t left_;
  std::vector<absl::StatusOr<int64_t>> offsets_;
};

std::shared_ptr<ShardReplica::PendingAppend> ShardReplica::StartAppend(
    const ShardOwner& claim, const std::vector<std::string_view>& entries) {
  auto pending = std::make_shared<PendingAppend>(claim, entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    writer_.Append(
        shard_, MakeBatch(claim, std::string(entries[i])).SerializeAsString(),
        [pending, i](absl::StatusOr<int64_t> offset) { pending->Delivered(i, std::move(offset)); });
  }
  return pending;
}

absl::StatusOr<std::vector<int64_t>> ShardReplica::ConfirmAppend(PendingAppend& pending,
                                                                 int64_t timeout_ms) {
  if (!serving_.has_value() || serving_->epoch != pending.claim().epoch ||
      serving_->node_id != pending.claim().node_id) {
    serving_ = pending.claim();
    lost_at_ = INT64_MAX;
  }
  auto offsets = pending.Wait();
  if (!offsets.ok()) return offsets.status();
  if (offsets->empty()) return offsets;
  // Offsets of one partition grow in append order (idempotent producer). A batch of ours is
  // valid unless a newer claim precedes it: read past the round, then compare.
  if (absl::Status read = ReadTo(offsets->back() + 1, timeout_ms); !read.ok()) return read;
  if (offsets->back() > lost_at_) {
    const int64_t first_fenced = *std::upper_bound(offsets->begin(), offsets->end(), lost_at_);
    return absl::AbortedError(fmt::format(
        "shard {}: batch at offset {} fenced: {} claimed the shard at epoch {} (ours was {})",
        shard_, first_fenced, ledger_.owner().node_id, ledger_.owner().epoch,
        pending.claim().epoch));
  }
  return offsets;
}

absl::StatusOr<std::vector<int64_t>> ShardReplica::AppendRecords(
    const std::vector<internal::v1::ShardLogRecord>& records) {
  struct Outcomes {
    std::mutex mu;
    std::condition_variable cv;
    size_t left;
    std::vector<absl::StatusOr<int64_t>> offsets;
  } outcomes{.left = records.size(),
             .offsets = std::vector<absl::StatusOr<int64_t>>(records.size())};
  for (size_t i = 0; i < records.size(); ++i) {
    writer_.Append(shard_, records[i].SerializeAsString(),
                   [&outcomes, i](absl::StatusOr<int64_t> offset) {
                     std::lock_guard lock(outcomes.mu);
                     outcomes.offsets[i] = std::move(offset);
                     if (--outcomes.left == 0) outcomes.cv.notify_one();
                   });
  }
  std::unique_lock lock(outcomes.mu);
  outcomes.cv.wait(lock, [&] { return outcomes.left == 0; });
  std::vector<int64_t> offsets;
  offsets.reserve(records.size());
  for (auto& offset : outcomes.offsets) {
    if (!offset.ok()) return offset.status();
    offsets.push_back(*offset);
  }
  return offsets;
}

bool ShardReplica::Own(const internal::v1::ShardLogRecord& record) const {
  return serving_.has_value() && record.node_id() == serving_->node_id &&
         record.epoch() == serving_->epoch;
}

absl::Status ShardReplica::ReadTo(int64_t end, int64_t timeout_ms, const Observer& observe) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (next_offset_ < end) {
    const int64_t left = RemainingMs(deadline);
    if (left == 0) {
      return absl::DeadlineExceededError(fmt::format(
          "shard {}: log read to offset {} of {} in {} ms", shard_, next_offset_, end, timeout_ms));
    }
    auto records = reader_->Poll(left, 1024);
    if (!records.ok()) return records.status();
    if (absl::Status applied = ApplyRecords(*records, observe); !applied.ok()) return applied;
  }
  return absl::OkStatus();
}

absl::Status ShardReplica::ApplyArrived(int64_t timeout_ms) {
  auto records = reader_->Poll(timeout_ms, 1024);
  if (!records.ok()) return records.status();
  return ApplyRecords(*records, nullptr);
}

absl::Status ShardReplica::ApplyRecords(std::vector<bridge::LoggedRecord>& records,
                                        const Observer& observe) {
  for (bridge::LoggedRecord& logged : records) {
    if (logged.shard != shard_ || logged.offset < next_offset_) continue;
    internal::v1::ShardLogRecord record;
    const Verdict verdict = record.ParseFromString(logged.value)
                                ? ledger_.Apply(record, logged.offset)
                                : Verdict::kMalformed;
    switch (verdict) {
      case Verdict::kBatchValid:
        if (absl::Status applied = apply_(record.journal_entry(), logged.offset, Own(record));
            !applied.ok()) {
          return applied;
        }
        ++stats_.applied;
        break;
      case Verdict::kBatchFenced:
        ++stats_.fenced;
        break;
      case Verdict::kClaimAccepted:
        if (serving_.has_value() && lost_at_ == INT64_MAX) lost_at_ = logged.offset;
        if (apply_claim_) {
          if (absl::Status applied = apply_claim_(ledger_.owner()); !applied.ok()) {
            return applied;
          }
        }
        ++stats_.claims;
        break;
      case Verdict::kMalformed:
        ++stats_.malformed;
        break;
      case Verdict::kClaimRejected:
        break;
    }
    if (observe) observe(logged.offset, verdict);
    next_offset_ = logged.offset + 1;  // not past a record that failed to apply
  }
  return absl::OkStatus();
}

}  // namespace feed::cluster

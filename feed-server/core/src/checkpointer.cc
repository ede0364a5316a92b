#include "checkpointer.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "journal.h"
#include "logging.h"

namespace feed::core {

using storage::Table;

void PutCheckpointMarker(storage::WriteGroup& group, uint64_t covered) {
  group.Put(Table::kMeta, storage::meta_keys::kCheckpointSequence,
            storage::EncodeSequence(covered));
  group.Put(Table::kMeta, storage::meta_keys::kNextSequence, storage::EncodeSequence(covered + 1));
}

void Checkpointer::Start(uint64_t checkpoint_sequence) {
  written_.store(checkpoint_sequence, std::memory_order_relaxed);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "feed-checkpoint");
    Loop();
  });
}

absl::Status Checkpointer::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return absl::OkStatus();
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return Run();
}

absl::Status Checkpointer::Checkpoint() { return Run(); }

void Checkpointer::Committed(size_t active_bytes) {
  if (active_bytes < options_.checkpoint_bytes) return;
  {
    std::lock_guard lock(mu_);
    if (wake_) return;
    wake_ = true;
  }
  cv_.notify_one();
}

void Checkpointer::Loop() {
  const auto interval =
      std::chrono::milliseconds(std::max<int64_t>(1, options_.checkpoint_interval_ms));
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, interval, [&] { return wake_ || stopping_; });
      if (stopping_) return;
      wake_ = false;
    }
    if (absl::Status s = Run(); !s.ok()) {
      // The overlay keeps the records (and the journal its entries): the next run retries.
      CoreLogger()->error("checkpoint failed: {}; retrying in {} ms", s.ToString(),
                          interval.count());
    }
  }
}

uint64_t Checkpointer::RetainedFrom(uint64_t limit) {
  if (limit <= trimmed_until_) return limit;
  if (options_.event_retention_ms <= 0 && options_.event_retention_bytes == 0) return limit;
  // Over the size bound: about that share of the entries (the oldest) may go as well.
  uint64_t over_size = 0;
  if (options_.event_retention_bytes > 0) {
    const uint64_t bytes = store_.ApproximateBytes(Table::kJournal);
    if (bytes > options_.event_retention_bytes) {
      const double share =
          static_cast<double>(bytes - options_.event_retention_bytes) / static_cast<double>(bytes);
      over_size = static_cast<uint64_t>(
          share * static_cast<double>(store_.ApproximateCount(Table::kJournal)) + 1);
    }
  }
  const int64_t cutoff_ms = options_.event_retention_ms > 0
                                ? clock_.NowMillis() - options_.event_retention_ms
                                : INT64_MAX;
  // Oldest first, up to `limit`: an entry goes while it is over the size bound or older than
  // the window; the first one that stays ends the scan.
  uint64_t from = trimmed_until_;
  uint64_t dropped = 0;
  (void)store_.Scan(Table::kJournal, storage::EncodeSequence(trimmed_until_), "",
                    [&](std::string_view key, std::string_view value) {
                      const auto last = storage::DecodeSequence(key);
                      if (!last || *last >= limit) return false;
                      const auto at = JournalEntryTime(value);
                      if (dropped >= over_size && at && *at >= cutoff_ms) return false;
                      from = *last + 1;
                      ++dropped;
                      return true;
                    });
  return std::min(from, limit);
}

absl::Status Checkpointer::Run() {
  std::lock_guard run(run_mu_);
  overlay_.Freeze();  // false when nothing new, or when a failed run left a frozen one
  // In chunks: a single large write would hold the commits back for its whole length (the
  // store writes one group at a time). A crash between chunks leaves some records of this
  // generation in the tables and the old checkpoint_sequence in meta: the restart replays the
  // journal from there, which writes the same records again, in order, over them.
  auto group = store_.NewWriteGroup();
  auto frozen_through = overlay_.WriteFrozen(*group, kCheckpointChunk, [&](storage::WriteGroup& g) {
    absl::Status s = store_.Commit(g, storage::CommitMode::kNoSync);
    g.Clear();
    return s;
  });
  if (!frozen_through.ok()) return frozen_through.status();
  uint64_t covered = written_.load(std::memory_order_relaxed);
  if (*frozen_through > 0) {
    covered = *frozen_through;
    PutCheckpointMarker(*group, covered);
  }
  // Entries are keyed by their last sequence: those below trim_until are checkpointed and
  // every event in them is delivered. Without a relay cursor nothing is delivered yet (the
  // journal is also the outbox) and nothing is trimmed.
  uint64_t trim_until = trimmed_until_;
  auto cursor = store_.Get(Table::kMeta, storage::meta_keys::kRelayCursor);
  if (!cursor.ok()) return cursor.status();
  if (cursor->has_value()) {
    if (auto c = storage::DecodeSequence(**cursor)) {
      trim_until = std::max(trim_until, std::min(*c, covered + 1));
    }
  }
  trim_until = RetainedFrom(trim_until);
  if (trim_until > trimmed_until_) {
    group->DeleteRange(Table::kJournal, storage::EncodeSequence(trimmed_until_),
                       storage::EncodeSequence(trim_until));
  }
  if (group->Count() == 0) return absl::OkStatus();
  if (absl::Status s = store_.Commit(*group, storage::CommitMode::kNoSync); !s.ok()) return s;
  if (*frozen_through > 0) overlay_.DropFrozen();
  written_.store(covered, std::memory_order_relaxed);
  trimmed_until_ = trim_until;
  checkpoints_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace feed::core

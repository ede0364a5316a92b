#include "checkpointer.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "logging.h"

namespace feed::core {

using storage::Table;

namespace {
// Operations per checkpoint write (about 0.2 ms of the store's write path each).
constexpr size_t kChunk = 512;
}  // namespace

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

absl::Status Checkpointer::Run() {
  std::lock_guard run(run_mu_);
  overlay_.Freeze();  // false when nothing new, or when a failed run left a frozen one
  // In chunks: a single large write would hold the commits back for its whole length (the
  // store writes one group at a time). A crash between chunks leaves some records of this
  // generation in the tables and the old checkpoint_sequence in meta: the restart replays the
  // journal from there, which writes the same records again, in order, over them.
  auto group = store_.NewWriteGroup();
  auto frozen_through = overlay_.WriteFrozen(*group, kChunk, [&](storage::WriteGroup& g) {
    absl::Status s = store_.Commit(g, storage::CommitMode::kNoSync);
    g.Clear();
    return s;
  });
  if (!frozen_through.ok()) return frozen_through.status();
  uint64_t covered = written_.load(std::memory_order_relaxed);
  if (*frozen_through > 0) {
    covered = *frozen_through;
    group->Put(Table::kMeta, storage::meta_keys::kCheckpointSequence,
               storage::EncodeSequence(covered));
    group->Put(Table::kMeta, storage::meta_keys::kNextSequence,
               storage::EncodeSequence(covered + 1));
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

// The commit pipeline (RocksDB's WriteThread is the model): every mutation passes four
// stages, each on its own thread, joined by bounded hand-offs.
//
//   callers ──Enqueue──▶ writer ──▶ committer ──▶ completer ──▶ publisher
//            commands    apply      seal, write   answer the    events to the
//                        (Apply)    + one WAL     callers, in   change feed
//                                   sync for all  commit order  (Publish)
//
// Threads (named for top -H, perf and gdb):
//   feed-writer     Apply: the batch's commands against the writer's state; blocks only on
//                   the commit hand-off when kMaxBatchesInFlight are being written.
//   feed-committer  Stages::seal of every waiting batch (its stock events built, its journal
//                   entry encoded: batch_seal.h), then Store::Commit of each, the last one
//                   syncing the WAL; then Stages::committed (the overlay takes the records).
//   feed-completer  each command's Complete (the callers' `done`), then hands the events on;
//                   blocks when kMaxUnpublishedEvents wait for the publisher.
//   feed-publisher  Publish: all waiting events in one publication, in sequence order.
// While a commit is under way, commands gather in the queue and the writer applies them as
// one batch when the committer is free, or at once when max_batch/8 wait: fewer, larger
// write rounds. When nothing is being written or completed and no command waits, the writer
// writes and completes its batch itself (a thread wake-up costs more than it overlaps).
//
// In cluster mode (CoreOptions::replicated_log) the committer first appends the sealed entries
// to the shard's log and waits for them to be confirmed there: that, not the local commit, is
// what answers the callers (replicated_log.h).
//
// A failed commit stops the pipeline for good (crash-only: a restart recovers the committed
// state): that batch and every later command fail with UNAVAILABLE.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "batch.h"
#include "core/change_feed.h"
#include "core/clock.h"
#include "core/options.h"
#include "handoff.h"
#include "storage/store.h"

namespace feed::core {

class CommitPipeline {
 public:
  struct Stages {
    // Writer thread: applies `commands` (and, when `sweep`, the expiry sweep) and returns
    // the batch to commit, which owns the commands.
    std::function<BatchPtr(std::vector<std::unique_ptr<Command>>& commands, bool sweep)> apply;
    // The thread that writes it (committer, or writer when idle), before the commit: what the
    // writer left for later (batch_seal.h), such as the journal entry.
    std::function<void(Batch& batch)> seal;
    // The thread that wrote it (committer, or writer when idle), in commit order, before its
    // callers are answered: the batch is durable.
    std::function<void(const Batch& batch)> committed;
    // Publisher thread: events of answered commands, in sequence order.
    std::function<void(const std::vector<EventPtr>& events)> publish;
  };
  static constexpr size_t kMaxBatchesInFlight = 16;
  static constexpr size_t kMaxUnpublishedEvents = 1 << 16;

  CommitPipeline(storage::Store& store, const Clock& clock, const CoreOptions& options,
                 Stages stages);
  ~CommitPipeline() { Shutdown(); }

  void Start();
  // Refuses new commands (UNAVAILABLE), lets every stage finish what it has, joins them in
  // order. Idempotent.
  void Shutdown();

  // Any thread. A rejected command (shutting down, failed, queue full) fails at once on the
  // caller's thread.
  void Enqueue(std::unique_ptr<Command> command);

  // The id of the newest batch known to be committed (writer: its overlays may go).
  uint64_t committed_batch() const { return committed_batch_.load(std::memory_order_acquire); }
  // OK while commands are accepted.
  absl::Status health() const;
  size_t queue_depth() const;
  size_t unpublished_events() const { return publish_.waiting(); }
  uint64_t batches_written() const { return batches_written_.load(std::memory_order_relaxed); }
  uint64_t commands_completed() const {
    return commands_completed_.load(std::memory_order_relaxed);
  }
  uint64_t events_completed() const { return events_completed_.load(std::memory_order_relaxed); }

 private:
  void WriterLoop();
  void CommitterLoop();
  void CompleterLoop();
  void PublisherLoop();
  // The writer's rule: apply now? With mu_ held.
  bool WriterMayApply() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunBatch(std::vector<std::unique_ptr<Command>>& commands, bool sweep);
  absl::Status Write(std::vector<BatchPtr>& batches);
  // Cluster mode: the batches' entries into the replicated log, their positions into their
  // write groups.
  absl::Status Replicate(std::vector<BatchPtr>& batches);
  // Stops the pipeline for good after a failed commit.
  absl::Status Fail(const absl::Status& cause);
  void Complete(const std::vector<BatchPtr>& batches);

  storage::Store& store_;
  const Clock& clock_;
  const CoreOptions& options_;
  const Stages stages_;
  const size_t eager_apply_commands_;

  // Callers -> writer.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Command>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set once a commit fails: the writer's in-memory state is then ahead of the disk.
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  int64_t next_sweep_ms_ = 0;  // writer thread

  // writer -> committer: batches being written count too, so at most 16 are uncommitted.
  Handoff<BatchPtr> commit_{kMaxBatchesInFlight, Handoff<BatchPtr>::Bound::kWaitingAndTaken};
  // committer -> completer.
  Handoff<BatchPtr> complete_{kMaxBatchesInFlight, Handoff<BatchPtr>::Bound::kWaiting};
  // completer -> publisher: events of answered commands.
  Handoff<std::vector<EventPtr>> publish_{kMaxUnpublishedEvents,
                                          Handoff<std::vector<EventPtr>>::Bound::kWaiting,
                                          [](const std::vector<EventPtr>& e) { return e.size(); }};

  std::atomic<uint64_t> committed_batch_{0};
  std::atomic<uint64_t> batches_written_{0}, commands_completed_{0}, events_completed_{0};
  std::thread writer_, committer_, completer_, publisher_;
};

}  // namespace feed::core

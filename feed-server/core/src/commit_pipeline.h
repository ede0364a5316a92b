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
// writes and completes its batch itself (a thread wake-up costs more than it overlaps; not in
// cluster mode, where the write waits for the log).
//
// In cluster mode (CoreOptions::replicated_log) the sealed entries go to the shard's log
// first, and their confirmation there, not the local commit, is what answers the callers
// (replicated_log.h). The committer starts each round and hands it to a fifth stage,
//   feed-replicator  waits for each round's confirmation, in order, then Store::Commit of its
//                    batches (no WAL sync: the log holds them) and Stages::committed,
// so that up to replication_rounds_in_flight rounds are on their way to the log at once.
//
// A failed commit stops the pipeline for good (crash-only: a restart recovers the committed
// state): that batch and every later command fail with UNAVAILABLE.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
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
  // Cluster mode: one round of batches on its way to the replicated log.
  struct ReplicationRound {
    std::vector<BatchPtr> batches;
    std::unique_ptr<ReplicatedLog::Round> log_round;  // null when no batch has an entry
    absl::Status status;  // a failure before the log: the round fails as a whole
    std::chrono::steady_clock::time_point started;
  };

  void WriterLoop();
  void CommitterLoop();
  void ReplicatorLoop();
  void CompleterLoop();
  void PublisherLoop();
  // The writer's rule: apply now? With mu_ held.
  bool WriterMayApply() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunBatch(std::vector<std::unique_ptr<Command>>& commands, bool sweep);
  // Single-node mode: Prepare, then CommitLocally, on one thread (the committer, or the
  // writer when idle).
  absl::Status Write(std::vector<BatchPtr>& batches);
  // Before anything leaves: the pipeline has not failed, no batch is broken; seals them.
  absl::Status Prepare(std::vector<BatchPtr>& batches);
  // Cluster mode: the batches' entries on their way to the log (null when none has one).
  std::unique_ptr<ReplicatedLog::Round> StartReplication(const std::vector<BatchPtr>& batches);
  // Waits for `round` (may be null) and writes each logged batch's position into its group.
  absl::Status ConfirmReplication(const std::vector<BatchPtr>& batches,
                                  ReplicatedLog::Round* round);
  // The store commit of each batch (the last one syncing the WAL, in single-node mode), then
  // Stages::committed.
  absl::Status CommitLocally(std::vector<BatchPtr>& batches,
                             std::chrono::steady_clock::time_point started);
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
  // Cluster mode, committer -> replicator: rounds on their way to the log.
  Handoff<ReplicationRound> replicate_{std::max<size_t>(1, options_.replication_rounds_in_flight),
                                       Handoff<ReplicationRound>::Bound::kWaitingAndTaken};
  // committer (replicator in cluster mode) -> completer.
  Handoff<BatchPtr> complete_{kMaxBatchesInFlight, Handoff<BatchPtr>::Bound::kWaiting};
  // completer -> publisher: events of answered commands.
  Handoff<std::vector<EventPtr>> publish_{kMaxUnpublishedEvents,
                                          Handoff<std::vector<EventPtr>>::Bound::kWaiting,
                                          [](const std::vector<EventPtr>& e) { return e.size(); }};

  std::atomic<uint64_t> committed_batch_{0};
  std::atomic<uint64_t> batches_written_{0}, commands_completed_{0}, events_completed_{0};
  std::thread writer_, committer_, replicator_, completer_, publisher_;
};

}  // namespace feed::core

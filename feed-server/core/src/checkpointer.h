// The checkpointer: moves committed records from the overlay (table_overlay.h) into the
// store's tables and trims the journal, on its own thread (feed-checkpoint). A checkpoint
// runs every options.checkpoint_interval_ms, as soon as the overlay's active generation holds
// options.checkpoint_bytes, and when asked (Checkpoint); one write group carries the records,
// meta checkpoint_sequence and next_sequence, and the deletion of the journal entries that are
// both checkpointed and delivered (below meta relay_cursor; none while no relay ever ran) and
// past the event retention (options.event_retention_ms / _bytes: kept for replays).
//
// It does not sync: the journal entries it covers are durable already, and a checkpoint lost
// in a crash is lost whole (with its trim), so a restart replays those entries again.
//
// Thread-safe: Checkpoint may be called from any thread; checkpoints run one at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "core/clock.h"
#include "core/options.h"
#include "storage/store.h"
#include "table_overlay.h"

namespace feed::core {

// Operations per checkpoint write (about 0.2 ms of the store's write path each): a single
// large write would hold the commits back for its whole length.
inline constexpr size_t kCheckpointChunk = 512;

// The marker of a checkpoint that covers every batch through `covered`: meta
// checkpoint_sequence and next_sequence, written last, with the chunk that ends it.
void PutCheckpointMarker(storage::WriteGroup& group, uint64_t covered);

class Checkpointer {
 public:
  // `clock` dates the retention window (the events' commit times come from it too).
  Checkpointer(storage::Store& store, TableOverlay& overlay, const Clock& clock,
               const CoreOptions& options)
      : store_(store), overlay_(overlay), clock_(clock), options_(options) {}
  ~Checkpointer() { (void)Shutdown(); }

  // `checkpoint_sequence`: what the tables include at startup (meta checkpoint_sequence).
  void Start(uint64_t checkpoint_sequence);
  // Stops the thread, then writes a last checkpoint (the store at rest needs no replay).
  // Idempotent.
  absl::Status Shutdown();
  // Writes everything committed before the call into the tables; returns once it is there.
  absl::Status Checkpoint();
  // The committer, after an Apply that left `active_bytes` in the overlay's active
  // generation: wakes the thread once that reaches options.checkpoint_bytes.
  void Committed(size_t active_bytes);

  uint64_t checkpoints() const { return checkpoints_.load(std::memory_order_relaxed); }
  uint64_t checkpoint_sequence() const { return written_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  absl::Status Run();
  // Where trimming may go up to, at most `limit`, keeping the entries within
  // options.event_retention_ms and event_retention_bytes (the oldest go first).
  uint64_t RetainedFrom(uint64_t limit);

  storage::Store& store_;
  TableOverlay& overlay_;
  const Clock& clock_;
  const CoreOptions& options_;

  std::mutex run_mu_;           // one checkpoint at a time
  uint64_t trimmed_until_ = 0;  // journal keys below it are deleted (run_mu_)
  std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;      // mu_
  bool stopping_ = false;  // mu_
  std::thread thread_;
  std::atomic<uint64_t> checkpoints_{0};
  std::atomic<uint64_t> written_{0};
};

}  // namespace feed::core

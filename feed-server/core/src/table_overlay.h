// The committed records that the tables do not hold yet: every batch is committed as one
// journal entry (journal.h), and its table changes wait here until a checkpoint
// (checkpointer.h) writes them into the tables. Reads of committed state go through the
// overlay: its newest record of a key wins, the store answers for the others.
//
//   commits ──Apply──▶ active generation ──Freeze──▶ frozen generation ──(written)──▶ dropped
//   reads: active, then frozen, then the store's tables
//
// Many changes of one key between two checkpoints reach the table once (a level changed by a
// thousand reservations), and a new hold closed before the next checkpoint never reaches it.
//
// Thread-safe: Apply (the committer, in commit order) and the checkpointer's calls take the
// lock exclusively, briefly; reads share it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "mutation_log.h"
#include "storage/store.h"

namespace feed::core {

class TableOverlay {
 public:
  explicit TableOverlay(const storage::Store& store) : store_(store) {}

  // The records of a committed batch whose events end at `last_sequence`; batches in commit
  // order. The overlay keeps `log` (its slots view its bytes) until a checkpoint wrote it.
  // Returns the memory the active generation holds now (its logs and slots).
  size_t Apply(std::shared_ptr<const MutationLog> log, uint64_t last_sequence);

  // The committed record of `key`: the overlay's, else the store's.
  absl::StatusOr<std::optional<std::string>> Get(storage::Table table, std::string_view key) const;

  // Runs `read` on one consistent view of every table and the last sequence it includes. The
  // view is valid inside `read` only, and commits wait while it runs: keep it short.
  absl::Status Read(const std::function<absl::Status(const storage::ReadView& view,
                                                     uint64_t as_of_sequence)>& read) const;

  // A consistent view that outlives the call: the store's snapshot under a copy of the
  // overlay's records of `table` that `ranges` select (every record when empty). Other
  // tables read from the snapshot only.
  struct KeyRange {
    std::string key;
    bool prefix;  // every key that starts with `key`, else `key` alone
  };
  std::unique_ptr<storage::ReadView> Snapshot(storage::Table table,
                                              const std::vector<KeyRange>& ranges,
                                              uint64_t* as_of_sequence) const;

  // The checkpointer's steps. Freeze: the active generation becomes the frozen one and
  // commits go to a new one; false when nothing waits or a frozen one is still there.
  bool Freeze();
  // Adds every record of the frozen generation to `group`, calling `flush(group)` (which
  // commits and clears it) whenever it holds `chunk` operations, so that no single write
  // holds the store's write path for long; the rest stays in `group` for the caller to
  // commit with its checkpoint marker. Returns the last sequence the generation includes (0:
  // none frozen), or the first flush error.
  absl::StatusOr<uint64_t> WriteFrozen(
      storage::WriteGroup& group, size_t chunk,
      const std::function<absl::Status(storage::WriteGroup&)>& flush) const;
  // After the frozen generation's records are committed to the tables.
  void DropFrozen();

  uint64_t last_sequence() const;
  // At startup, after the journal's replay: the last committed sequence, which the overlay
  // did not see if nothing was replayed.
  void SetLastSequence(uint64_t last_sequence);
  struct Size {
    size_t records = 0;  // slots of both generations
    size_t bytes = 0;    // memory they hold: the logs they keep and their slots
  };
  Size size() const;
  size_t active_bytes() const;

 private:
  struct Slot {
    std::string_view value;
    bool deleted;
    bool fresh;  // no record in the tables or the frozen generation (MutationLog::Op::fresh)
  };
  using TableMap = absl::btree_map<std::string_view, Slot>;
  struct Generation {
    std::array<TableMap, storage::kTableCount> tables;
    std::vector<std::shared_ptr<const MutationLog>> logs;  // own what the slots view
    uint64_t last_sequence = 0;
    size_t bytes = 0;
    bool empty() const { return logs.empty(); }
  };
  class LayeredView;
  class SnapshotView;

  const storage::Store& store_;
  mutable absl::Mutex mu_;
  Generation active_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Generation> frozen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace feed::core

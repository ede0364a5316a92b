#include "core/journal_checkpoint.h"

#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "checkpointer.h"
#include "journal.h"

namespace feed::core {

using storage::Table;

absl::StatusOr<JournalCheckpoint> CheckpointJournal(storage::Store& store, size_t max_bytes) {
  JournalCheckpoint out;
  auto checkpoint = storage::ReadMetaSequence(store, storage::meta_keys::kCheckpointSequence);
  if (!checkpoint.ok()) return checkpoint.status();
  out.checkpoint_sequence = checkpoint->value_or(0);
  auto next = storage::ReadMetaSequence(store, storage::meta_keys::kNextSequence);
  if (!next.ok()) return next.status();

  // The entries after the checkpoint, in order; the newest change of each key, viewing the
  // logs that hold it.
  std::vector<std::unique_ptr<MutationLog>> logs;
  struct Newest {
    const MutationLog* log;
    const MutationLog::Op* op;
  };
  absl::flat_hash_map<std::pair<int, std::string_view>, Newest> newest;
  size_t bytes = 0;
  absl::Status scanned = ScanJournalAfter(
      store, out.checkpoint_sequence, next->value_or(out.checkpoint_sequence + 1),
      [&](ReplayedEntry& entry, size_t entry_bytes) {
        out.checkpoint_sequence = entry.last_sequence;
        ++out.entries;
        logs.push_back(std::make_unique<MutationLog>(std::move(entry.mutations)));
        const MutationLog& log = *logs.back();
        for (const auto& op : log.ops()) {
          newest.insert_or_assign(std::pair{static_cast<int>(op.table), log.key(op)},
                                  Newest{&log, &op});
        }
        bytes += entry_bytes;
        if (bytes < max_bytes) return true;
        out.more = true;  // (perhaps nothing follows: the next call finds out)
        return false;
      });
  if (!scanned.ok()) return scanned;
  if (out.entries == 0) return out;

  auto group = store.NewWriteGroup();
  for (const auto& [where, change] : newest) {
    const auto table = static_cast<Table>(where.first);
    if (change.op->deleted) {
      group->Delete(table, where.second);
    } else {
      group->Put(table, where.second, change.log->value(*change.op));
    }
    ++out.records;
    if (group->Count() >= kCheckpointChunk) {
      if (absl::Status s = store.Commit(*group, storage::CommitMode::kNoSync); !s.ok()) return s;
      group->Clear();
    }
  }
  PutCheckpointMarker(*group, out.checkpoint_sequence);
  if (absl::Status s = store.Commit(*group, storage::CommitMode::kNoSync); !s.ok()) return s;
  return out;
}

}  // namespace feed::core

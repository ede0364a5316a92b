// A checkpoint of a store that no core has open: a cluster standby's copy of a shard, which
// stores the owner's journal entries and nothing else (cluster/shard_store.h). Without it a
// takeover replays every entry since the store began; with it, only those since the last
// checkpoint, as after a restart of a single node.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "storage/store.h"

namespace feed::core {

struct JournalCheckpoint {
  size_t entries = 0;                // journal entries folded into the tables
  size_t records = 0;                // table records written (each changed key once)
  uint64_t checkpoint_sequence = 0;  // the last sequence the tables include now
  bool more = false;                 // stopped at max_bytes: entries after it wait
};

// Writes the table changes of the journal entries after the store's checkpoint into its
// tables, each changed key once (its newest change), and moves the checkpoint (and the next
// sequence) past them: the same records the owner's checkpointer writes, so a core opened on
// the store recovers the same state and replays only what came after. Reads at most about
// `max_bytes` of entries per call; the rest waits for the next one. Writes in chunks without
// a WAL sync, the marker last: a crash part-way leaves the old marker, and the next
// checkpoint or recovery writes the same records again, in order, over them. Leaves the
// journal itself alone (the entries are the outbox a later owner's relay sends from).
// DATA_LOSS when an entry does not parse or the entries after the checkpoint have a gap.
// Not for a store a core has open: that core's checkpointer owns its tables.
absl::StatusOr<JournalCheckpoint> CheckpointJournal(storage::Store& store,
                                                    size_t max_bytes = 32u << 20);

}  // namespace feed::core

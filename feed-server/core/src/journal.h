// The journal entry of a committed batch (feed.internal.v1.JournalEntry, stored in
// Table::kJournal under its big-endian last sequence): the batch's events, which the relay
// publishes, and its table changes, which a restart replays. One record per batch is what the
// commit writes; the tables follow at checkpoints (checkpointer.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/change_feed.h"
#include "internal/v1/records.pb.h"
#include "mutation_log.h"

namespace feed::core {

// Appends the wire form of the entry to `out` (cleared first), without building the message:
// each event is serialized once, straight into it.
void EncodeJournalEntry(const std::vector<std::shared_ptr<events::v1::Event>>& events,
                        const MutationLog& mutations, std::string* out);

// The events of the journal entries that hold sequences first..last, in order, as long as
// they are consecutive and end at `last` (the entries before a gap, or trimmed away, are
// left out). What a restarted change feed retains.
absl::StatusOr<std::vector<EventPtr>> ReadJournalEvents(const storage::ReadView& view,
                                                        uint64_t first, uint64_t last);

// The commit time (ms since the epoch) of the first event of a stored entry; nothing when the
// entry holds no event or does not parse. What the checkpointer's retention goes by.
std::optional<int64_t> JournalEntryTime(std::string_view value);

// A stored entry read back: its table changes as a MutationLog, and its sequence range.
struct ReplayedEntry {
  uint64_t first_sequence = 0;
  uint64_t last_sequence = 0;
  MutationLog mutations;
};
// DATA_LOSS naming `key` when the bytes are not a well-formed entry stored under its key.
absl::StatusOr<ReplayedEntry> DecodeJournalEntry(std::string_view key, std::string_view value);

// The entries stored after `checkpoint_sequence`, decoded, in order, the first holding
// `first_sequence` and each continuing the one before: `each(entry, stored_bytes)` returns
// false to stop early. DATA_LOSS on a corrupt entry or a gap (nothing after it is visited).
// What a restart replays and what a standby checkpoint folds into the tables.
absl::Status ScanJournalAfter(const storage::ReadView& view, uint64_t checkpoint_sequence,
                              uint64_t first_sequence,
                              const std::function<bool(ReplayedEntry& entry, size_t bytes)>& each);

}  // namespace feed::core

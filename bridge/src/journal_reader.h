// Reading events out of the journal (Table::kJournal: one feed.internal.v1.JournalEntry per
// committed batch, keyed by its big-endian last sequence) without copying them: the relay
// sends the stored event bytes as the Kafka record's value.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/status/status.h"
#include "storage/store.h"

namespace feed::bridge::internal {

struct JournalVisitor {
  // Each event with sequence >= from, in order; false stops the read.
  std::function<bool(uint64_t sequence, std::string_view event)> event;
  // An entry that is not a well-formed journal entry: the sequences after the previous
  // entry up to `last_sequence` (its key) cannot be read. False stops the read.
  std::function<bool(uint64_t last_sequence, std::string_view why)> corrupt;
};

// Reads the entries that hold sequences >= from, in order.
absl::Status ReadJournal(const storage::ReadView& view, uint64_t from,
                         const JournalVisitor& visitor);

// The commit time (ms since the epoch) of the first event with sequence >= from; nothing when
// there is none or it does not parse as an events.v1.Event.
absl::StatusOr<std::optional<int64_t>> FirstEventTime(const storage::ReadView& view, uint64_t from);

// The first sequence of the first journal entry, if any.
absl::StatusOr<std::optional<uint64_t>> FirstJournalSequence(const storage::ReadView& view);

}  // namespace feed::bridge::internal

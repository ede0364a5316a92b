// Test helpers for the journal (Table::kJournal): its events read back, and entries written
// directly (a relay test fills an outbox without a core).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/v1/events.pb.h"
#include "internal/v1/records.pb.h"
#include "storage/store.h"

namespace feed::test_util {

// Every event in the journal, in order; each entry's key and sequence range checked.
inline std::vector<events::v1::Event> JournalEvents(const storage::ReadView& view) {
  std::vector<events::v1::Event> out;
  auto s = view.Scan(
      storage::Table::kJournal, "", "", [&](std::string_view key, std::string_view value) {
        internal::v1::JournalEntry entry;
        EXPECT_TRUE(entry.ParseFromArray(value.data(), static_cast<int>(value.size())));
        EXPECT_EQ(key, storage::EncodeSequence(entry.last_sequence()));
        EXPECT_EQ(entry.last_sequence() - entry.first_sequence() + 1,
                  static_cast<uint64_t>(entry.events_size()));
        for (const auto& bytes : entry.events()) {
          events::v1::Event e;
          EXPECT_TRUE(e.ParseFromString(bytes));
          out.push_back(std::move(e));
        }
        return true;
      });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Adds one journal entry holding `events` (consecutive sequences), no table changes.
inline void PutJournalEntry(storage::WriteGroup& group,
                            const std::vector<events::v1::Event>& events) {
  internal::v1::JournalEntry entry;
  entry.set_first_sequence(events.front().sequence());
  entry.set_last_sequence(events.back().sequence());
  for (const auto& e : events) entry.add_events(e.SerializeAsString());
  group.Put(storage::Table::kJournal, storage::EncodeSequence(entry.last_sequence()),
            entry.SerializeAsString());
}

// An entry of one event given as bytes (which may be anything: a relay test stores garbage).
inline void PutJournalEvent(storage::WriteGroup& group, uint64_t sequence, std::string bytes) {
  internal::v1::JournalEntry entry;
  entry.set_first_sequence(sequence);
  entry.set_last_sequence(sequence);
  entry.add_events(std::move(bytes));
  group.Put(storage::Table::kJournal, storage::EncodeSequence(sequence), entry.SerializeAsString());
}

}  // namespace feed::test_util

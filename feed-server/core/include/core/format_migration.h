// What the core contributes to the store's format migrations (storage::RocksDbOptions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace feed::core {

// Format 1 -> 2: one outbox event (its sequence and serialized events.v1.Event) as a journal
// entry of its own, with no table changes (format 1's tables already hold them).
std::string JournalEntryOfEvent(uint64_t sequence, std::string_view event);

}  // namespace feed::core

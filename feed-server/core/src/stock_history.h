// GetStock as of a past sequence: the levels read now, rewound with the stock events the
// journal keeps. For each level, the first change after the sequence says what the level was
// before it (its level minus its deltas); a level with no change since is as it is now.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "inventory/v1/inventory.pb.h"
#include "storage/store.h"

namespace feed::core {

// `response` holds the levels of the request's keys as of `now_sequence`; they become what
// they were right after `as_of` (<= now_sequence). OUT_OF_RANGE when the journal no longer
// keeps every event after `as_of`, naming the oldest sequence that can be answered.
absl::Status RewindLevels(const storage::ReadView& journal, uint64_t as_of, uint64_t now_sequence,
                          inventory::v1::GetStockResponse* response);

}  // namespace feed::core

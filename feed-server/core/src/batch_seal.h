// Sealing a batch: the stock-change events the writer left pending (PendingStockChange) are
// built, and the batch's journal entry is encoded and put into its write group. Runs on the
// thread that writes the batch (the committer, or the writer when the pipeline is idle),
// before the commit, so the writer spends its time on decisions and the protobuf work runs
// beside it. Reads nothing of the writer's state but level keys, which never change.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "batch.h"

namespace feed::core {

// A new event in `b`'s arena (created on first use, sized to the batch) with its sequence,
// id ("<store_id>-<sequence>"), type, commit time, key and, when not empty, actor.
std::shared_ptr<events::v1::Event> NewBatchEvent(Batch& b, std::string_view store_id,
                                                 uint64_t sequence, std::string_view type,
                                                 std::string_view key, std::string_view actor);

// Builds the pending events into their slots, then puts the journal entry (when the batch
// has events) under its last sequence. Once per batch, after the writer has handed it on.
void SealBatch(Batch& b, std::string_view store_id);

}  // namespace feed::core

// How `stock import` sends a file's lines: BatchAdjustStock calls of at most `batch_size`
// lines, in file order. In cluster mode a node refuses a batch whose SKUs span shards, so each
// batch then holds the lines of one shard only, and goes to that shard's owner. Pure: no
// network, unit-tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/shard_hash.h"
#include "stock_csv.h"

namespace feedctl {

struct ImportBatch {
  uint32_t shard = 0;         // 0 in single-node mode
  std::vector<size_t> lines;  // indexes into the parsed adjustments, in file order
};

// Batches ordered by their first line; `shard_count` 0: one shard (single-node mode).
std::vector<ImportBatch> PlanImportBatches(const std::vector<CsvAdjustment>& adjustments,
                                           uint32_t shard_count, size_t batch_size);

}  // namespace feedctl

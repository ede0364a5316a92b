// The shard of a SKU as a cluster computes it (docs/CLUSTER.md): FNV-1a 64 of its UTF-8
// bytes, mod the shard count of GetShardMapResponse. Import, export and watch group by it.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/fnv1a.h"

namespace feedctl {

// 0 when `shard_count` is 0 (a single node).
inline uint32_t ShardOfSku(std::string_view sku, uint32_t shard_count) {
  return shard_count == 0 ? 0 : static_cast<uint32_t>(feed::Fnv1a64Of(sku) % shard_count);
}

}  // namespace feedctl

// Which shard a SKU lives on in cluster mode (docs/CLUSTER.md): FNV-1a (64 bits) of the SKU's
// UTF-8 bytes, modulo the shard count fixed at cluster creation. The same in every build and
// language, so the server, feedctl, the load generator and the other clients agree on it.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/fnv1a.h"

namespace feed {

// 0 when `shard_count` is 0 (a single node, which serves everything).
inline uint32_t ShardOf(std::string_view sku, uint32_t shard_count) {
  return shard_count == 0 ? 0 : static_cast<uint32_t>(Fnv1a64Of(sku) % shard_count);
}

}  // namespace feed

// Which shard a request (unary, or the opening request of WatchStock / StreamOrderUpdates)
// belongs to in cluster mode (docs/CLUSTER.md, "Routing"): by its
// SKUs (every one on the same shard) or by the shard its generated id names ("rsv-s<shard>-",
// "ord-s<shard>-": cluster mode's cores tag their ids so, CoreOptions::generated_id_tag).
// Requests whose data spans shards are refused with FAILED_PRECONDITION naming the shards
// (cross-shard orders are the saga of docs/CLUSTER.md, not built yet).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace feed::cluster {

// "s<shard>": the generated_id_tag of shard `shard`'s core.
std::string GeneratedIdTag(uint32_t shard);

// The shard of `request`, a request of gRPC method `method`
// ("inventory.v1.InventoryService/Reserve"). INVALID_ARGUMENT naming the field when nothing
// in it names a shard (no SKU, an id that is not a cluster id), FAILED_PRECONDITION when its
// SKUs are on several shards, UNIMPLEMENTED for a method that is not routed by shard.
absl::StatusOr<uint32_t> ShardOfRequest(std::string_view method,
                                        const google::protobuf::Message& request,
                                        uint32_t shard_count);

}  // namespace feed::cluster

// Cluster mode's routing seen from the front door (docs/CLUSTER.md, "Routing"): which core runs
// a unary request, the shard map clients route by, and which shard store an audit reads. The app
// wires a cluster node in (app/src/cluster_server.cc); a single node has none and runs everything
// on its one core.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "admin/store_operations.h"
#include "core/inventory_core.h"
#include "google/protobuf/message.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::server {

// An UNAVAILABLE answered because another node serves the request's shard carries the owner's
// address under this payload; the gRPC handlers send it as trailing metadata of this name.
inline constexpr std::string_view kShardOwnerKey = "feed-shard-owner";

// Cluster mode: the request metadata (gRPC) or header (HTTP) naming the one shard a stream
// serves: every `Feed`, a `WatchStock` of every SKU of a shard.
inline constexpr std::string_view kShardSelectorKey = "feed-shard";

// Debian's Abseil has its own string_view, hence the conversions.
inline void SetShardOwner(absl::Status& status, std::string_view address) {
  status.SetPayload(absl::string_view(kShardOwnerKey.data(), kShardOwnerKey.size()),
                    absl::Cord(absl::string_view(address.data(), address.size())));
}

// The owner's address `status` carries, if any.
inline std::optional<std::string> ShardOwnerOf(const absl::Status& status) {
  auto owner = status.GetPayload(absl::string_view(kShardOwnerKey.data(), kShardOwnerKey.size()));
  if (!owner.has_value()) return std::nullopt;
  return std::string(*owner);
}

class CoreRouter {
 public:
  virtual ~CoreRouter() = default;
  // The core serving the request's shard here. UNAVAILABLE (with kShardOwnerKey when the
  // owner is known) when another node serves it or it is being taken over; the routing
  // errors of cluster/request_routing.h otherwise. The caller keeps the pointer until the
  // call is handed to the core.
  virtual absl::StatusOr<std::shared_ptr<core::InventoryCore>> Route(
      std::string_view method, const google::protobuf::Message& request) const = 0;
  // The core serving `shard` here, with Route's errors; INVALID_ARGUMENT naming `field` when
  // the cluster has no such shard. Feed streams serve one shard each.
  virtual absl::StatusOr<std::shared_ptr<core::InventoryCore>> RouteShard(
      uint32_t shard, std::string_view field) const = 0;
  // The shard `request` (of gRPC method `method`) belongs to (cluster/request_routing.h).
  virtual absl::StatusOr<uint32_t> ShardOf(std::string_view method,
                                           const google::protobuf::Message& request) const = 0;
  virtual uint32_t shard_count() const = 0;
  virtual inventory::v1::GetShardMapResponse ShardMap() const = 0;

  // AdminService on this node's copy of `shard`: the owner's, or a standby's (`standby`).
  // INVALID_ARGUMENT naming the field when there is no such shard.
  struct ShardStore {
    admin::StoreOperations* operations;
    bool standby;
  };
  virtual absl::StatusOr<ShardStore> StoreOfShard(uint32_t shard) const = 0;
};

// The shard number in a kShardSelectorKey value; INVALID_ARGUMENT naming the key when it is
// not a number (RouteShard refuses a number past the cluster's shards).
absl::StatusOr<uint32_t> ParseShardSelector(std::string_view value, uint32_t shard_count);

// The core a `WatchStock` runs on here: a watch of every SKU runs on the core of the shard
// `shard_selector` (the kShardSelectorKey value, if the call has one) names, since a shard's
// store holds that shard's levels only; any other watch is routed by its keys.
absl::StatusOr<std::shared_ptr<core::InventoryCore>> RouteWatchStock(
    const CoreRouter& router, const inventory::v1::WatchStockRequest& request,
    std::optional<std::string_view> shard_selector);

}  // namespace feed::server

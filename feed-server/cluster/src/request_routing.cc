#include "cluster/request_routing.h"

#include <charconv>
#include <set>

#include "cluster/shard_hash.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"

namespace feed::cluster {
namespace {

namespace inv = inventory::v1;
namespace ord = order::v1;

// The shards of the SKUs visited by `each`; the one they share, or the error naming `field`.
template <class Each>
absl::StatusOr<uint32_t> ShardOfSkus(std::string_view field, uint32_t shard_count, Each each) {
  std::set<uint32_t> shards;
  each([&](const std::string& sku) { shards.insert(ShardOf(sku, shard_count)); });
  if (shards.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: at least one SKU is required", field));
  }
  if (shards.size() > 1) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: the SKUs are on shards {} of this cluster; one request may touch one shard only "
        "(GetShardMap tells which node serves each; cross-shard orders are not supported yet)",
        field, fmt::join(shards, ", ")));
  }
  return *shards.begin();
}

// The shard named by a generated id: "<prefix>s<shard>-<sequence>".
absl::StatusOr<uint32_t> ShardOfId(std::string_view field, std::string_view id,
                                   std::string_view prefix, uint32_t shard_count) {
  auto invalid = [&] {
    return absl::InvalidArgumentError(
        fmt::format("{}: '{}' is not an id of this cluster (cluster ids look like {}s<shard>-<n>)",
                    field, id, prefix));
  };
  if (!id.starts_with(prefix) || id.size() < prefix.size() + 3 || id[prefix.size()] != 's') {
    return invalid();
  }
  const char* begin = id.data() + prefix.size() + 1;
  const char* end = id.data() + id.size();
  uint32_t shard = 0;
  auto [next, ec] = std::from_chars(begin, end, shard);
  if (ec != std::errc() || next == begin || next == end || *next != '-') return invalid();
  if (shard >= shard_count) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: '{}' names shard {}, but this cluster has {} shards", field, id, shard, shard_count));
  }
  return shard;
}

}  // namespace

std::string GeneratedIdTag(uint32_t shard) { return fmt::format("s{}", shard); }

absl::StatusOr<uint32_t> ShardOfRequest(std::string_view method,
                                        const google::protobuf::Message& request,
                                        uint32_t shard_count) {
  const std::string_view name = method.substr(method.rfind('/') + 1);
  const std::string_view service = method.substr(0, method.rfind('/'));
  if (service == "inventory.v1.InventoryService") {
    if (name == "GetStock") {
      const auto& r = static_cast<const inv::GetStockRequest&>(request);
      return ShardOfSkus("keys", shard_count, [&](auto add) {
        for (const auto& key : r.keys()) add(key.sku());
        for (const auto& sku : r.sku()) add(sku);
      });
    }
    if (name == "WatchStock") {
      const auto& r = static_cast<const inv::WatchStockRequest&>(request);
      if (r.keys().empty() && r.sku().empty()) {
        return absl::FailedPreconditionError(
            "keys: in cluster mode a stream follows the SKUs of one shard; name them (keys or "
            "sku), or watch every SKU of one shard on its owner with the request metadata "
            "(over HTTP, the header) feed-shard: <shard>");
      }
      return ShardOfSkus("keys", shard_count, [&](auto add) {
        for (const auto& key : r.keys()) add(key.sku());
        for (const auto& sku : r.sku()) add(sku);
      });
    }
    if (name == "AdjustStock") {
      const auto& r = static_cast<const inv::AdjustStockRequest&>(request);
      return ShardOfSkus("sku", shard_count, [&](auto add) { add(r.sku()); });
    }
    if (name == "BatchAdjustStock") {
      const auto& r = static_cast<const inv::BatchAdjustStockRequest&>(request);
      return ShardOfSkus("adjustments", shard_count, [&](auto add) {
        for (const auto& a : r.adjustments()) add(a.sku());
      });
    }
    if (name == "Reserve") {
      const auto& r = static_cast<const inv::ReserveRequest&>(request);
      if (!r.reservation_id().empty()) {
        return absl::FailedPreconditionError(
            "reservation_id: in cluster mode the server chooses reservation ids (they name "
            "their shard); leave it empty");
      }
      return ShardOfSkus("lines", shard_count, [&](auto add) {
        for (const auto& line : r.lines()) add(line.sku());
      });
    }
    if (name == "Commit") {
      return ShardOfId("reservation_id",
                       static_cast<const inv::CommitRequest&>(request).reservation_id(), "rsv-",
                       shard_count);
    }
    if (name == "Release") {
      return ShardOfId("reservation_id",
                       static_cast<const inv::ReleaseRequest&>(request).reservation_id(), "rsv-",
                       shard_count);
    }
    if (name == "GetReservation") {
      return ShardOfId("reservation_id",
                       static_cast<const inv::GetReservationRequest&>(request).reservation_id(),
                       "rsv-", shard_count);
    }
  } else if (service == "order.v1.OrderService") {
    if (name == "CreateOrder") {
      const auto& r = static_cast<const ord::CreateOrderRequest&>(request);
      return ShardOfSkus("lines", shard_count, [&](auto add) {
        for (const auto& item : r.item_ids()) add(item);
        for (const auto& line : r.lines()) add(line.sku());
      });
    }
    std::string_view order_id;
    if (name == "GetOrder") {
      order_id = static_cast<const ord::GetOrderRequest&>(request).order_id();
    } else if (name == "PayOrder") {
      order_id = static_cast<const ord::PayOrderRequest&>(request).order_id();
    } else if (name == "AdvanceOrder") {
      order_id = static_cast<const ord::AdvanceOrderRequest&>(request).order_id();
    } else if (name == "CancelOrder") {
      order_id = static_cast<const ord::CancelOrderRequest&>(request).order_id();
    } else if (name == "StreamOrderUpdates") {
      order_id = static_cast<const ord::OrderSubscriptionRequest&>(request).order_id();
    } else {
      return absl::UnimplementedError(fmt::format("{} is not served in cluster mode yet", method));
    }
    return ShardOfId("order_id", order_id, "ord-", shard_count);
  }
  return absl::UnimplementedError(fmt::format("{} is not served in cluster mode yet", method));
}

}  // namespace feed::cluster

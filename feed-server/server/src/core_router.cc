#include "server/core_router.h"

#include <charconv>

#include "fmt/format.h"

namespace feed::server {

absl::StatusOr<uint32_t> ParseShardSelector(std::string_view value, uint32_t shard_count) {
  uint32_t shard = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), shard);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
    return absl::InvalidArgumentError(fmt::format("{}: '{}' is not a shard number (0 to {})",
                                                  kShardSelectorKey, value, shard_count - 1));
  }
  return shard;
}

absl::StatusOr<std::shared_ptr<core::InventoryCore>> RouteWatchStock(
    const CoreRouter& router, const inventory::v1::WatchStockRequest& request,
    std::optional<std::string_view> shard_selector) {
  if (shard_selector && request.keys().empty() && request.sku().empty()) {
    auto shard = ParseShardSelector(*shard_selector, router.shard_count());
    if (!shard.ok()) return shard.status();
    return router.RouteShard(*shard, kShardSelectorKey);
  }
  return router.Route("inventory.v1.InventoryService/WatchStock", request);
}

}  // namespace feed::server

#include "stock_streams.h"

#include <map>

#include "common/shard_hash.h"

namespace feedctl {

inventory::v1::WatchStockRequest StockStream::Request(const std::string& location) const {
  inventory::v1::WatchStockRequest request;
  for (const auto& sku : skus) {
    auto* key = request.add_keys();
    key->set_sku(sku);
    key->set_location(location);
  }
  return request;
}

std::unique_ptr<grpc::ClientContext> StockStream::NewContext(const Connection& c) const {
  auto context = c.NewContext(/*streaming=*/true);
  if (shard && skus.empty()) context->AddMetadata("feed-shard", std::to_string(*shard));
  return context;
}

std::vector<StockStream> PlanStockStreams(Connection& c, const std::vector<std::string>& skus) {
  const inventory::v1::GetShardMapResponse map = c.ShardMap();
  const uint32_t shards = map.shard_count();
  std::vector<StockStream> streams;
  if (shards == 0) {
    streams.push_back({&c.primary(), std::nullopt, skus});
  } else if (skus.empty()) {
    for (uint32_t s = 0; s < shards; ++s) streams.push_back({&c.OwnerOf(map, s), s, {}});
  } else {
    std::map<uint32_t, size_t> stream_of_shard;
    for (const auto& sku : skus) {
      const uint32_t s = feed::ShardOf(sku, shards);
      auto [it, added] = stream_of_shard.try_emplace(s, streams.size());
      if (added) streams.push_back({&c.OwnerOf(map, s), s, {}});
      streams[it->second].skus.push_back(sku);
    }
  }
  return streams;
}

}  // namespace feedctl

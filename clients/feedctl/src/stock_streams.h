// The WatchStock streams that together cover some SKUs, or every level: one on a single node;
// in cluster mode one per shard, on the shard's owner as the shard map names it (the SKUs of
// that shard, or every SKU of it, named by the request metadata `feed-shard`). What `stock
// export` and `stock watch` open.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "connection.h"
#include "inventory/v1/inventory.pb.h"

namespace feedctl {

struct StockStream {
  Endpoint* at;
  std::optional<uint32_t> shard;  // cluster mode
  std::vector<std::string> skus;  // empty: every level (of `shard` in cluster mode)

  // The request for `skus` at `location` (empty: every location).
  inventory::v1::WatchStockRequest Request(const std::string& location) const;
  // A context for the stream: it names the shard when the keys cannot (every SKU of it).
  std::unique_ptr<grpc::ClientContext> NewContext(const Connection& c) const;
};

std::vector<StockStream> PlanStockStreams(Connection& c, const std::vector<std::string>& skus);

}  // namespace feedctl

// Cluster mode: a unary call whose shard another node serves, run there (docs/CLUSTER.md,
// "Routing"). The HTTP gateway forwards such calls, because HTTP clients do not follow
// feed-shard-owner; gRPC clients are answered UNAVAILABLE with the owner instead and call it
// themselves (one hop fewer). The app wires the gRPC implementation in
// (app/src/grpc_shard_forwarder.h).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace feed::server {

class ShardForwarder {
 public:
  // The owner's status and, when OK, its reply (valid during the call only).
  using Done = std::function<void(const absl::Status&, const google::protobuf::Message* reply)>;
  virtual ~ShardForwarder() = default;
  // Runs `method` ("inventory.v1.InventoryService/Reserve") with `request` on the node at
  // `address`, sending `headers` (the caller's authorization, idempotency-key) as gRPC
  // metadata; the owner checks them again. `reply_prototype` names the reply's type. `done`
  // once, on any thread.
  virtual void Forward(std::string_view address, std::string_view method,
                       const google::protobuf::Message& request,
                       const google::protobuf::Message& reply_prototype,
                       std::vector<std::pair<std::string, std::string>> headers,
                       Done done) const = 0;
};

}  // namespace feed::server

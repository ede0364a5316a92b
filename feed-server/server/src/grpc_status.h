// The one place where core errors become gRPC statuses, and Feed's in-band results.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::server {

grpc::Status ToGrpcStatus(const absl::Status& status);
// Cluster mode: a status that says another node serves the call's shard carries the owner's
// address (server/core_router.h); it goes to the client as trailing metadata. Before Finish.
void AddShardOwnerMetadata(const absl::Status& status, grpc::ServerContextBase* ctx);
// A Feed command's result code (google.rpc.Code) and message.
void SetFeedResult(const absl::Status& status, inventory::v1::FeedResponse* out);

}  // namespace feed::server

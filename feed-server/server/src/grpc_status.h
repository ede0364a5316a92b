// The one place where core errors become gRPC statuses, and Feed's in-band results.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::server {

grpc::Status ToGrpcStatus(const absl::Status& status);
// A Feed command's result code (google.rpc.Code) and message.
void SetFeedResult(const absl::Status& status, inventory::v1::FeedResponse* out);

}  // namespace feed::server

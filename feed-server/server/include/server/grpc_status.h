// The one place where core errors become gRPC statuses.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace feed::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace feed::server

#include "grpc_status.h"

#include "server/core_router.h"

namespace feed::server {

// absl::StatusCode, grpc::StatusCode and google.rpc.Code share the canonical numbering.
grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

void SetFeedResult(const absl::Status& status, inventory::v1::FeedResponse* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  if (!status.ok()) out->set_message(std::string(status.message()));
}

void AddShardOwnerMetadata(const absl::Status& status, grpc::ServerContextBase* ctx) {
  if (auto owner = ShardOwnerOf(status)) {
    ctx->AddTrailingMetadata(std::string(kShardOwnerKey), *std::move(owner));
  }
}

}  // namespace feed::server

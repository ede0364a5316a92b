// ShardForwarder over gRPC: one channel per owner address, kept for the process; each call a
// callback-API generic unary call with the request's bytes, so no stub per service is needed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "server/config.h"
#include "server/shard_forwarder.h"

namespace feed::server {

class GrpcShardForwarder final : public ShardForwarder {
 public:
  // Plaintext, or TLS when the node serves TLS: peers verified against
  // --cluster-peer-ca-file (else the system's roots), and with mutual TLS the node presents
  // its own certificate. Errors name the flag of a file that cannot be read.
  static absl::StatusOr<std::unique_ptr<GrpcShardForwarder>> Create(const ServerConfig& config);

  void Forward(std::string_view address, std::string_view method,
               const google::protobuf::Message& request,
               const google::protobuf::Message& reply_prototype,
               std::vector<std::pair<std::string, std::string>> headers, Done done) const override;

 private:
  GrpcShardForwarder(std::shared_ptr<grpc::ChannelCredentials> credentials, int64_t timeout_ms)
      : credentials_(std::move(credentials)), timeout_ms_(timeout_ms) {}
  grpc::GenericStub& StubFor(std::string_view address) const;

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const int64_t timeout_ms_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<grpc::GenericStub>, std::less<>> stubs_;
};

}  // namespace feed::server

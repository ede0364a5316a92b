// ShardForwarder over gRPC: one channel per owner address, kept for the process; each call a
// callback-API generic unary call with the request's bytes, so no stub per service is needed.
// Shutdown (and the destructor) cancels the calls in flight and waits for their callbacks, so
// no `done` runs after the gateway that passed it is gone.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
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
  ~GrpcShardForwarder() override;

  // Cancels every call in flight (their `done` gets CANCELLED) and waits until each callback
  // has returned; later calls are answered UNAVAILABLE at once.
  void Shutdown();

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
  // The contexts of the calls whose callback has not returned yet.
  mutable std::mutex calls_mu_;
  mutable std::condition_variable calls_done_;
  mutable std::set<grpc::ClientContext*> in_flight_;
  mutable bool shut_down_ = false;
};

}  // namespace feed::server

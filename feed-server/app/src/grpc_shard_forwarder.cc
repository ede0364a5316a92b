#include "grpc_shard_forwarder.h"

#include <chrono>

#include "fmt/format.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "security/flag_file.h"

namespace feed::server {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// One forwarded call: what gRPC's callback needs alive until it runs.
struct ForwardedCall {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer reply;
  std::unique_ptr<google::protobuf::Message> reply_message;
  ShardForwarder::Done done;
};

void Answer(ForwardedCall& call, const grpc::Status& status) {
  if (!status.ok()) return call.done(FromGrpc(status), nullptr);
  grpc::ProtoBufferReader reader(&call.reply);
  if (!reader.status().ok() || !call.reply_message->ParseFromZeroCopyStream(&reader)) {
    return call.done(absl::InternalError("the owner's reply did not parse"), nullptr);
  }
  call.done(absl::OkStatus(), call.reply_message.get());
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcShardForwarder>> GrpcShardForwarder::Create(
    const ServerConfig& config) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (config.tls.enabled()) {
    grpc::SslCredentialsOptions ssl;
    if (!config.cluster.peer_ca_file.empty()) {
      auto roots = security::ReadFlagFile(config.cluster.peer_ca_file, "--cluster-peer-ca-file");
      if (!roots.ok()) return roots.status();
      ssl.pem_root_certs = std::move(*roots);
    }
    if (config.tls.mutual()) {
      auto chain = security::ReadFlagFile(config.tls.cert_file, "--tls-cert-file");
      if (!chain.ok()) return chain.status();
      auto key = security::ReadFlagFile(config.tls.key_file, "--tls-key-file");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = std::move(*chain);
      ssl.pem_private_key = std::move(*key);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  return std::unique_ptr<GrpcShardForwarder>(
      new GrpcShardForwarder(std::move(credentials), config.cluster.log_timeout_ms));
}

GrpcShardForwarder::~GrpcShardForwarder() { Shutdown(); }

void GrpcShardForwarder::Shutdown() {
  std::unique_lock lock(calls_mu_);
  shut_down_ = true;
  for (grpc::ClientContext* context : in_flight_) context->TryCancel();
  calls_done_.wait(lock, [this] { return in_flight_.empty(); });
}

grpc::GenericStub& GrpcShardForwarder::StubFor(std::string_view address) const {
  std::lock_guard lock(mu_);
  auto it = stubs_.find(address);
  if (it == stubs_.end()) {
    it = stubs_
             .emplace(std::string(address), std::make_unique<grpc::GenericStub>(grpc::CreateChannel(
                                                std::string(address), credentials_)))
             .first;
  }
  return *it->second;
}

void GrpcShardForwarder::Forward(std::string_view address, std::string_view method,
                                 const google::protobuf::Message& request,
                                 const google::protobuf::Message& reply_prototype,
                                 std::vector<std::pair<std::string, std::string>> headers,
                                 Done done) const {
  auto call = std::make_shared<ForwardedCall>();
  {
    std::lock_guard lock(calls_mu_);
    if (shut_down_) {
      done(absl::UnavailableError("this node is shutting down; retry on another"), nullptr);
      return;
    }
    in_flight_.insert(&call->context);
  }
  call->done = std::move(done);
  call->reply_message.reset(reply_prototype.New());
  call->context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::milliseconds(timeout_ms_));
  for (auto& [key, value] : headers) call->context.AddMetadata(key, value);
  grpc::Slice bytes(request.SerializeAsString());
  call->request = grpc::ByteBuffer(&bytes, 1);
  StubFor(address).UnaryCall(&call->context, fmt::format("/{}", method), grpc::StubOptions(),
                             &call->request, &call->reply, [this, call](grpc::Status status) {
                               Answer(*call, status);
                               std::lock_guard lock(calls_mu_);
                               in_flight_.erase(&call->context);
                               if (in_flight_.empty()) calls_done_.notify_all();
                             });
}

}  // namespace feed::server

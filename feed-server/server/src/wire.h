// The gRPC services take and return raw bytes (grpc::ByteBuffer) so that a request that
// does not parse is answered by us, with INVALID_ARGUMENT and a message saying why, instead
// of by gRPC's generated code (UNIMPLEMENTED with an empty message, and a protobuf log line
// per call).
#pragma once

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace feed::server {

// Parses `bytes` into `message` (core::ParseMessage: INVALID_ARGUMENT saying why).
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);
// Serializes `message` into `out`, as gRPC's generated code would.
void SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out);

}  // namespace feed::server

#include "wire.h"

#include "core/message_parsing.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace feed::server {

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* message) {
  // The reader only reads; it takes a non-const buffer for historical reasons.
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&bytes));
  if (!reader.status().ok()) {
    return absl::InvalidArgumentError("the request could not be parsed: unreadable bytes");
  }
  return core::ParseMessage(&reader, message);
}

void SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  out->Clear();  // a stream reuses its buffer once the previous write is done
  bool own_buffer = false;
  // Fails only for messages over 2 GB, which no response of ours comes near.
  (void)grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(message, out,
                                                                                   &own_buffer);
}

}  // namespace feed::server

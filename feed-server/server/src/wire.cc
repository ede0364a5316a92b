#include "wire.h"

#include "core/message_parsing.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/slice.h"

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
  // One size pass, then the bytes straight into one slice of that size. gRPC's generic
  // serializer streams a message over 8 KB through a ZeroCopyOutputStream, which sizes the
  // whole tree a second time first: a Feed answer with 256 results paid for it twice.
  const size_t size = message.ByteSizeLong();
  grpc::Slice slice(size);
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  grpc::ByteBuffer bytes(&slice, 1);
  out->Swap(&bytes);  // a stream reuses `out` once the previous write is done
}

}  // namespace feed::server

#include "idempotency.h"

#include "common/fnv1a.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace feed::core {
namespace {

// The offset basis stored fingerprints were made with, one digit short of FNV's: a new one
// would turn the retry of every stored key into ALREADY_EXISTS.
constexpr uint64_t kFingerprintBasis = 1469598103934665603ULL;

// The method, a NUL, then the request's bytes.
uint64_t Fnv1a(std::string_view method, std::string_view bytes) {
  return Fnv1a64(kFingerprintBasis)
      .Update(method)
      .Update(std::string_view("\0", 1))
      .Update(bytes)
      .value();
}

}  // namespace

uint64_t HashRequest(std::string_view method, const google::protobuf::MessageLite& request) {
  // Requests have no map fields, so their serialization is canonical already; a small one is
  // serialized on the stack.
  const size_t size = request.ByteSizeLong();
  char stack[512];
  if (size <= sizeof stack) {
    request.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(stack));
    return Fnv1a(method, std::string_view(stack, size));
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  return Fnv1a(method, bytes);
}

absl::StatusOr<std::optional<internal::v1::IdempotencyRecord>> WriterState::FindIdempotency(
    Batch& b, const std::string& key) {
  // A record of this batch or of one still being committed: the value of its put.
  std::string_view value;
  const Batch* overlaid = FindInOverlays(b, [&](Batch& batch) -> const Batch* {
    auto it = batch.idempotency.find(key);
    if (it == batch.idempotency.end()) return nullptr;
    value = batch.mutations->value(batch.mutations->ops()[it->second]);
    return &batch;
  });
  absl::StatusOr<std::optional<std::string>> stored;
  if (overlaid == nullptr) {
    stored = overlay_.Get(storage::Table::kIdempotency, key);
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) return std::optional<internal::v1::IdempotencyRecord>();
    value = **stored;
  }
  int64_t created_at_ms = 0;
  std::string_view payload;
  internal::v1::IdempotencyRecord record;
  if (!storage::DecodeTimestamped(value, &created_at_ms, &payload) ||
      !record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(fmt::format("idempotency record for key '{}' is corrupt", key));
  }
  if (b.now_ms - created_at_ms > options_.idempotency_retention_ms) {
    return std::optional<internal::v1::IdempotencyRecord>();  // expired: the key is free again
  }
  return record;
}

}  // namespace feed::core

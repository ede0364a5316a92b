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

void FillIdempotencyRecord(std::string_view method, uint64_t fingerprint,
                           const google::protobuf::MessageLite& response, int64_t now_ms,
                           internal::v1::IdempotencyRecord* record) {
  record->set_method(method.data(), method.size());
  record->set_fingerprint(fingerprint);
  response.SerializeToString(record->mutable_response());
  record->set_created_at_ms(now_ms);
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
    if (!stored->has_value()) return FindKeyInReservation(b, key);
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
    return FindKeyInReservation(b, key);  // this record expired: the key is free again here
  }
  return record;
}

bool WriterState::DerivesReservationIds() const {
  return options_.history_retention_ms <= 0 ||
         options_.history_retention_ms >= options_.idempotency_retention_ms;
}

std::string WriterState::KeyedReservationId(const std::string& key) {
  // Every keyed command looks its derived id up: formatted without fmt's parser.
  const std::string& prefix = ReservationIdPrefix();
  std::string id(prefix.size() + 18, '0');
  prefix.copy(id.data(), prefix.size());
  id[prefix.size()] = '-';
  id[prefix.size() + 1] = 'k';
  uint64_t hash = Fnv1a64Of(key);
  for (size_t i = id.size(); hash != 0; hash >>= 4) id[--i] = "0123456789abcdef"[hash & 0xf];
  return id;
}

absl::StatusOr<std::optional<internal::v1::IdempotencyRecord>> WriterState::FindKeyInReservation(
    Batch& b, const std::string& key) {
  keyed_.derived_id_free = false;
  if (!DerivesReservationIds()) return std::optional<internal::v1::IdempotencyRecord>();
  keyed_.derived_id = KeyedReservationId(key);
  const std::string* key_record = nullptr;
  std::string closed_key_record;
  if (auto it = holds_.find(keyed_.derived_id); it != holds_.end()) {
    key_record = &it->second.key_record;
  } else {
    auto closed = FindClosed(b, keyed_.derived_id, &closed_key_record);
    if (!closed.ok()) return closed.status();
    if (closed->has_value()) key_record = &closed_key_record;
  }
  if (key_record == nullptr) {
    keyed_.derived_id_free = true;
    return std::optional<internal::v1::IdempotencyRecord>();
  }
  internal::v1::ReservationKeyRecord record;
  if (!record.ParseFromString(*key_record)) {
    return absl::DataLossError(
        fmt::format("key record of reservation '{}' is corrupt", keyed_.derived_id));
  }
  // Another key with the same hash, or this key's use past its retention: not a record of it.
  if (record.idempotency_key() != key ||
      b.now_ms - record.reserved_with().created_at_ms() > options_.idempotency_retention_ms) {
    return std::optional<internal::v1::IdempotencyRecord>();
  }
  return std::move(*record.mutable_reserved_with());
}

void WriterState::RecordKeyInHold(Batch& b, OpenHold& hold,
                                  const inventory::v1::ReserveResponse& response) {
  // A reused message keeps its strings' capacity: the hold's own copy is the one allocation.
  internal::v1::ReservationKeyRecord& record = key_record_buffer_;
  record.set_idempotency_key(*keyed_.key);
  FillIdempotencyRecord(keyed_.method, keyed_.fingerprint, response, b.now_ms,
                        record.mutable_reserved_with());
  record.SerializeToString(&hold.second.key_record);
  keyed_.recorded = true;
}

}  // namespace feed::core

// Idempotency: a mutation whose request carries an idempotency_key runs at most once per key
// within options.idempotency_retention_ms. The same key with the same request gets the first
// response back (replayed = true); with another method or request, ALREADY_EXISTS. A failed
// command records nothing, so it may be retried with the same key.
//
// The record of a key is kept in Table::kIdempotency, except for a Reserve that names no
// reservation id: it takes the id the key derives (KeyedReservationId), and the reservation
// carries the key's record (records.proto ReservationKeyRecord) for as long as it is kept,
// which is at least the key's retention (DerivesReservationIds). One record fewer per
// reservation. A derived id already taken (another key with the same hash, or this key's
// expired use) falls back to a sequenced id and a record in the table. So a key is looked up
// in the table first, then in the reservation its derived id names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "writer_state.h"

namespace feed::core {

// `request` canonically serialized, hashed with the method (a hash stable across processes
// and builds).
uint64_t HashRequest(std::string_view method, const google::protobuf::MessageLite& request);

// The request without its idempotency key, hashed. On the caller's thread: keeps the work
// off the writer.
template <class Req>
uint64_t Fingerprint(std::string_view method, Req& request) {
  std::string key = std::move(*request.mutable_idempotency_key());
  request.clear_idempotency_key();
  const uint64_t hash = HashRequest(method, request);
  request.set_idempotency_key(std::move(key));
  return hash;
}

// `record` becomes the record of a command's first `response`.
void FillIdempotencyRecord(std::string_view method, uint64_t fingerprint,
                           const google::protobuf::MessageLite& response, int64_t now_ms,
                           internal::v1::IdempotencyRecord* record);

template <class Req, class Resp>
absl::StatusOr<Resp> WriterState::RunIdempotent(std::string_view method, uint64_t fingerprint,
                                                Req& request, Batch& b,
                                                Handler<Req, Resp> handler) {
  const std::string& key = request.idempotency_key();
  keyed_.derived_id_free = false;
  if (!key.empty()) {
    auto found = FindIdempotency(b, key);
    if (!found.ok()) return found.status();
    if (found->has_value()) {
      const auto& record = **found;
      if (record.method() != method) {
        return absl::AlreadyExistsError(
            fmt::format("idempotency_key '{}' was already used with {}; use a new key for {}", key,
                        record.method(), method));
      }
      if (record.fingerprint() != fingerprint) {
        return absl::AlreadyExistsError(
            fmt::format("idempotency_key '{}' was already used with a different {} request; use "
                        "a new key for a new request",
                        key, method));
      }
      Resp replay;
      if (!replay.ParseFromString(record.response())) {
        return absl::DataLossError("stored response for idempotency_key is corrupt");
      }
      replay.set_replayed(true);
      return replay;
    }
  }
  Resp response;
  keyed_.key = key.empty() ? nullptr : &key;
  keyed_.method = method;
  keyed_.fingerprint = fingerprint;
  keyed_.recorded = false;
  absl::Status handled = (this->*handler)(request, b, response);
  keyed_.key = nullptr;  // it views the request
  if (!handled.ok()) return handled;
  if (!key.empty() && !keyed_.recorded) {
    // A reused message keeps its strings' capacity; the batch's overlay finds the record in
    // the mutation log (FindIdempotency) rather than keeping a copy.
    internal::v1::IdempotencyRecord& record = idempotency_buffer_;
    FillIdempotencyRecord(method, fingerprint, response, b.now_ms, &record);
    b.idempotency[key] = static_cast<uint32_t>(b.mutations->ops().size());
    b.mutations->PutMessage(storage::Table::kIdempotency, key, record,
                            storage::EncodeTimestamped(b.now_ms, {}));
  }
  return response;
}

}  // namespace feed::core

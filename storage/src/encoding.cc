#include "storage/store.h"

namespace feed::storage {

std::string_view TableName(Table table) {
  switch (table) {
    case Table::kStock:
      return "stock";
    case Table::kHolds:
      return "holds";
    case Table::kReservations:
      return "reservations";
    case Table::kOrders:
      return "orders";
    case Table::kIdempotency:
      return "idempotency";
    case Table::kJournal:
      return "journal";
    case Table::kMeta:
      return "meta";
  }
  return "unknown";
}

namespace {
void PutBigEndian64(uint64_t v, char* out) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}
uint64_t GetBigEndian64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}
}  // namespace

std::string EncodeSequence(uint64_t sequence) {
  std::string out(8, '\0');
  PutBigEndian64(sequence, out.data());
  return out;
}

std::optional<uint64_t> DecodeSequence(std::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  return GetBigEndian64(bytes.data());
}

absl::StatusOr<std::optional<uint64_t>> ReadMetaSequence(const ReadView& view,
                                                         std::string_view name) {
  auto value = view.Get(Table::kMeta, name);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::optional<uint64_t>();
  auto sequence = DecodeSequence(**value);
  if (!sequence) return absl::DataLossError("meta " + std::string(name) + " is corrupt");
  return sequence;
}

std::string EncodeTimestamped(int64_t created_at_ms, std::string_view payload) {
  std::string out(8 + payload.size(), '\0');
  PutBigEndian64(static_cast<uint64_t>(created_at_ms), out.data());
  out.replace(8, payload.size(), payload);
  return out;
}

bool DecodeTimestamped(std::string_view value, int64_t* created_at_ms, std::string_view* payload) {
  if (value.size() < 8) return false;
  *created_at_ms = static_cast<int64_t>(GetBigEndian64(value.data()));
  *payload = value.substr(8);
  return true;
}

}  // namespace feed::storage

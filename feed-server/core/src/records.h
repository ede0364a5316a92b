// The writer's plain in-memory types and their conversions to and from the stored records
// (protobuf messages). Plain fields rather than messages: a million holds are read at
// startup and every Reserve makes one, and a message costs an allocation per string.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"

namespace feed::core {

struct Level {
  int64_t on_hand = 0;
  int64_t reserved = 0;
  uint64_t version = 0;
  bool allow_backorder = false;
  int64_t updated_at_ms = 0;
  uint64_t sequence = 0;
};

// `level` (stored under `key` = LevelKey(sku, location)) as the API's StockLevel.
void FillLevel(std::string_view key, const Level& level, inventory::v1::StockLevel* out);

// An entry of the writer's levels: {LevelKey(sku, location), level}.
using LevelEntry = std::pair<const std::string, Level>;

struct HoldLine {
  std::string level_key;  // LevelKey(sku, location)
  int64_t quantity = 0;
};

// An open hold; its id is the key of the map that holds it.
struct Hold {
  std::string order_id;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  bool owned_by_order = false;
  absl::InlinedVector<HoldLine, 1> lines;  // most holds have one line
  // When Reserve derived the id from its idempotency key: that key's record
  // (ReservationKeyRecord, serialized), stored after the reservation. Empty otherwise.
  std::string key_record;
};

// The map entry of an open hold: {reservation id, hold}.
using OpenHold = std::pair<const std::string, Hold>;

// "<prefix>-<sequence>", the shape of the ids the writer generates (events, reservations
// and, through theirs, orders): formatted without fmt's parser, which is on the hot path.
inline std::string SequencedId(std::string_view prefix, uint64_t sequence) {
  char digits[20];
  const char* end = std::to_chars(digits, digits + sizeof digits, sequence).ptr;
  std::string id;
  id.reserve(prefix.size() + 1 + static_cast<size_t>(end - digits));
  id.append(prefix);
  id.push_back('-');
  id.append(digits, static_cast<size_t>(end - digits));
  return id;
}

// `out` becomes the HELD reservation record of `hold` (what kHolds stores, what Reserve
// returns). Empty strings are left unset: setting one would allocate it.
void FillReservation(const OpenHold& hold, inventory::v1::Reservation* out);
// The inverse, for recovery (the key record too); false if `r` is not a HELD reservation.
bool ToHold(const inventory::v1::Reservation& r, Hold* out);

// A stored reservation parses with its key record (ReservationKeyRecord) as unknown fields:
// they move into `*key_record` when it is given and are cleared from `r` either way, so that
// no caller is ever shown them.
void TakeKeyRecord(inventory::v1::Reservation& r, std::string* key_record);

// Lines naming the same level summed, in order of first appearance. `sku` and `location`
// view the request's lines, which outlive the command's handler.
struct AggregatedLine {
  std::string key;  // LevelKey(sku, location); a new hold takes it over
  std::string_view sku;
  std::string_view location;
  int64_t quantity;
  int first_index;  // the line's index in the request, so that errors name what was sent
};
// Most requests have one or two lines: those stay off the heap.
using AggregatedLines = absl::InlinedVector<AggregatedLine, 2>;

template <class LineT>
AggregatedLines Aggregate(const google::protobuf::RepeatedPtrField<LineT>& lines);

std::string_view ReservationStateName(inventory::v1::ReservationState state);

// A stored reservation or order as callers see it: nothing when it is absent or past the
// history retention (core/history.h), DATA_LOSS when it does not parse.
template <class Record>
absl::StatusOr<std::optional<Record>> ReadHistoryRecord(
    const absl::StatusOr<std::optional<std::string>>& stored, std::string_view what,
    bool (*expired)(const Record&, int64_t now_ms, int64_t retention_ms), int64_t now_ms,
    int64_t retention_ms, std::string* key_record = nullptr) {
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::optional<Record>();
  Record record;
  if (!record.ParseFromString(**stored)) {
    return absl::DataLossError(fmt::format("{} record is corrupt", what));
  }
  if (expired(record, now_ms, retention_ms)) return std::optional<Record>();
  if constexpr (std::is_same_v<Record, inventory::v1::Reservation>) {
    TakeKeyRecord(record, key_record);
  }
  return record;
}

}  // namespace feed::core

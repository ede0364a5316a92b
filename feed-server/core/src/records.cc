#include "records.h"

#include "core/level_key.h"
#include "google/protobuf/unknown_field_set.h"

namespace feed::core {

void FillLevel(std::string_view key, const Level& l, inventory::v1::StockLevel* out) {
  auto [sku, location] = SplitLevelKey(key);
  out->set_sku(sku.data(), sku.size());
  out->set_location(location.data(), location.size());
  out->set_on_hand(l.on_hand);
  out->set_reserved(l.reserved);
  out->set_available(l.on_hand - l.reserved);
  out->set_version(l.version);
  out->set_allow_backorder(l.allow_backorder);
  out->set_updated_at_ms(l.updated_at_ms);
  out->set_sequence(l.sequence);
}

void FillReservation(const OpenHold& hold, inventory::v1::Reservation* out) {
  out->Clear();
  out->set_reservation_id(hold.first);
  if (!hold.second.order_id.empty()) out->set_order_id(hold.second.order_id);
  out->set_state(inventory::v1::RESERVATION_STATE_HELD);
  out->set_created_at_ms(hold.second.created_at_ms);
  out->set_expires_at_ms(hold.second.expires_at_ms);
  out->set_owned_by_order(hold.second.owned_by_order);
  for (const auto& line : hold.second.lines) {
    auto [sku, location] = SplitLevelKey(line.level_key);
    auto* l = out->add_lines();
    l->set_sku(sku.data(), sku.size());
    if (!location.empty()) l->set_location(location.data(), location.size());
    l->set_quantity(line.quantity);
  }
}

bool ToHold(const inventory::v1::Reservation& r, Hold* out) {
  if (r.state() != inventory::v1::RESERVATION_STATE_HELD) return false;
  out->order_id = r.order_id();
  out->created_at_ms = r.created_at_ms();
  out->expires_at_ms = r.expires_at_ms();
  out->owned_by_order = r.owned_by_order();
  out->lines.clear();
  out->lines.reserve(r.lines_size());
  for (const auto& l : r.lines()) {
    out->lines.push_back({LevelKey(l.sku(), l.location()), l.quantity()});
  }
  out->key_record.clear();
  const auto& stored_only = r.GetReflection()->GetUnknownFields(r);
  if (!stored_only.empty()) stored_only.SerializeToString(&out->key_record);
  return true;
}

void TakeKeyRecord(inventory::v1::Reservation& r, std::string* key_record) {
  if (key_record != nullptr) key_record->clear();
  const auto* reflection = r.GetReflection();
  if (reflection->GetUnknownFields(r).empty()) return;
  if (key_record != nullptr) reflection->GetUnknownFields(r).SerializeToString(key_record);
  reflection->MutableUnknownFields(&r)->Clear();
}

template <class LineT>
AggregatedLines Aggregate(const google::protobuf::RepeatedPtrField<LineT>& lines) {
  AggregatedLines out;
  for (int i = 0; i < lines.size(); ++i) {
    std::string key = LevelKey(lines[i].sku(), lines[i].location());
    bool merged = false;
    for (auto& a : out) {
      if (a.key == key) {
        a.quantity += lines[i].quantity();
        merged = true;
        break;
      }
    }
    if (!merged) {
      out.push_back({std::move(key), lines[i].sku(), lines[i].location(), lines[i].quantity(), i});
    }
  }
  return out;
}
template AggregatedLines Aggregate(const google::protobuf::RepeatedPtrField<inventory::v1::Line>&);
template AggregatedLines Aggregate(const google::protobuf::RepeatedPtrField<order::v1::OrderLine>&);

std::string_view ReservationStateName(inventory::v1::ReservationState s) {
  switch (s) {
    case inventory::v1::RESERVATION_STATE_HELD:
      return "HELD";
    case inventory::v1::RESERVATION_STATE_COMMITTED:
      return "COMMITTED";
    case inventory::v1::RESERVATION_STATE_RELEASED:
      return "RELEASED";
    case inventory::v1::RESERVATION_STATE_EXPIRED:
      return "EXPIRED";
    default:
      return "UNSPECIFIED";
  }
}

}  // namespace feed::core

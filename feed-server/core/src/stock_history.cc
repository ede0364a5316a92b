#include "stock_history.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "core/level_key.h"
#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "internal/v1/records.pb.h"

namespace feed::core {

using inventory::v1::StockLevel;

absl::Status RewindLevels(const storage::ReadView& journal, uint64_t as_of, uint64_t now_sequence,
                          inventory::v1::GetStockResponse* response) {
  // The oldest event kept must be as_of + 1 or older (nothing after as_of was trimmed).
  std::optional<uint64_t> first_kept;
  absl::Status s =
      journal.Scan(storage::Table::kJournal, "", "", [&](std::string_view, std::string_view value) {
        internal::v1::JournalEntry entry;
        if (entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          first_kept = entry.first_sequence();
        }
        return false;
      });
  if (!s.ok()) return s;
  response->set_as_of_sequence(as_of);
  if (as_of >= now_sequence) return absl::OkStatus();  // nothing happened since
  if (!first_kept || *first_kept > as_of + 1) {
    return absl::OutOfRangeError(fmt::format(
        "as_of_sequence: {} is older than the events kept; the oldest that can be answered is "
        "{} (see --event-retention-ms)",
        as_of, first_kept ? *first_kept - 1 : now_sequence));
  }
  // Level key -> index in response->levels, for the levels not rewound yet.
  absl::flat_hash_map<std::string, int> pending;
  for (int i = 0; i < response->levels_size(); ++i) {
    const StockLevel& l = response->levels(i);
    pending.emplace(LevelKey(l.sku(), l.location()), i);
  }
  std::vector<bool> created_after(response->levels_size(), false);
  absl::Status error;
  events::v1::Event event;
  internal::v1::JournalEntry entry;
  s = journal.Scan(storage::Table::kJournal, storage::EncodeSequence(as_of + 1), "",
                   [&](std::string_view, std::string_view value) {
                     if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                       error = absl::DataLossError("as_of_sequence: a journal entry is corrupt");
                       return false;
                     }
                     for (const auto& bytes : entry.events()) {
                       if (!event.ParseFromString(bytes) || event.sequence() <= as_of ||
                           !event.has_stock_changed()) {
                         continue;
                       }
                       const auto& change = event.stock_changed();
                       auto it =
                           pending.find(LevelKey(change.level().sku(), change.level().location()));
                       if (it == pending.end()) continue;
                       StockLevel& l = *response->mutable_levels(it->second);
                       l.set_on_hand(change.level().on_hand() - change.delta_on_hand());
                       l.set_reserved(change.level().reserved() - change.delta_reserved());
                       l.set_available(l.on_hand() - l.reserved());
                       l.set_version(change.level().version() - 1);
                       l.set_sequence(0);
                       l.set_updated_at_ms(0);
                       created_after[it->second] = l.version() == 0;
                       pending.erase(it);
                       if (pending.empty()) return false;
                     }
                     return true;
                   });
  if (!s.ok()) return s;
  if (!error.ok()) return error;
  // Levels that did not exist yet: missing as of then.
  google::protobuf::RepeatedPtrField<StockLevel> kept;
  for (int i = 0; i < response->levels_size(); ++i) {
    StockLevel& l = *response->mutable_levels(i);
    if (!created_after[i]) {
      *kept.Add() = std::move(l);
      continue;
    }
    auto* m = response->add_missing();
    m->set_sku(l.sku());
    m->set_location(l.location());
  }
  response->mutable_levels()->Swap(&kept);
  return absl::OkStatus();
}

}  // namespace feed::core

#include "batch_seal.h"

#include <algorithm>

#include "common/event_types.h"
#include "core/level_key.h"
#include "journal.h"
#include "records.h"

namespace feed::core {

using events::v1::Event;

std::shared_ptr<Event> NewBatchEvent(Batch& b, std::string_view store_id, uint64_t sequence,
                                     std::string_view type, std::string_view key,
                                     std::string_view actor) {
  if (!b.arena) {
    // Sized to the batch: the change feed retains events (and so their arenas) for resume,
    // and a fixed 16 KB first block per one-command batch would hold 300 MB at 2,000
    // updates/s (tests/reliability/slow_subscribers_test.cc).
    google::protobuf::ArenaOptions options;
    options.start_block_size = std::clamp<size_t>(b.expected_events * 400, 512, 64 << 10);
    options.max_block_size = 64 << 10;
    b.arena = std::make_shared<google::protobuf::Arena>(options);
  }
  std::shared_ptr<Event> e(b.arena, google::protobuf::Arena::CreateMessage<Event>(b.arena.get()));
  e->set_sequence(sequence);
  e->set_event_id(SequencedId(store_id, sequence));  // moved in: the arena's string takes it
  e->set_type(type.data(), type.size());
  // Set in place (the clock's milliseconds are never negative): no temporary Timestamp.
  auto* occurred_at = e->mutable_occurred_at();
  occurred_at->set_seconds(b.now_ms / 1000);
  occurred_at->set_nanos(static_cast<int32_t>(b.now_ms % 1000) * 1'000'000);
  e->set_key(key.data(), key.size());
  if (!actor.empty()) e->set_actor(actor.data(), actor.size());
  return e;
}

void SealBatch(Batch& b, std::string_view store_id) {
  const std::string_view text_of_batch = b.pending_text;
  auto text = [&](PendingStockChange::Text t) { return text_of_batch.substr(t.at, t.size); };
  auto set = [](std::string_view v, auto setter) {
    if (!v.empty()) setter(v.data(), v.size());
  };
  for (const PendingStockChange& c : b.pending_changes) {
    const std::string_view sku = SplitLevelKey(*c.level_key).first;
    std::shared_ptr<Event> e =
        NewBatchEvent(b, store_id, c.sequence, event_types::kStockChanged, sku, text(c.actor));
    auto* changed = e->mutable_stock_changed();
    FillLevel(*c.level_key, c.level, changed->mutable_level());
    changed->set_delta_on_hand(c.delta_on_hand);
    changed->set_delta_reserved(c.delta_reserved);
    changed->set_cause(c.cause);
    set(text(c.reservation_id),
        [&](const char* d, size_t n) { changed->set_reservation_id(d, n); });
    set(text(c.order_id), [&](const char* d, size_t n) { changed->set_order_id(d, n); });
    set(text(c.reason), [&](const char* d, size_t n) { changed->set_reason(d, n); });
    b.events[c.event_index] = std::move(e);
  }
  b.pending_changes.clear();
  b.pending_text.clear();
  if (b.events.empty()) return;
  EncodeJournalEntry(b.events, *b.mutations, &b.journal_entry);
  b.group->Put(storage::Table::kJournal, storage::EncodeSequence(b.last_sequence), b.journal_entry);
}

}  // namespace feed::core

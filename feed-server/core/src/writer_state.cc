#include "writer_state.h"

#include <algorithm>

#include "batch_seal.h"
#include "common/event_types.h"
#include "core/history.h"
#include "core/level_key.h"
#include "core/validation.h"

namespace feed::core {

using events::v1::Event;
using inventory::v1::Reservation;
using inventory::v1::StockLevel;
using order::v1::Order;
using order::v1::OrderStatus;
using storage::Table;

BatchPtr WriterState::Apply(std::vector<std::unique_ptr<Command>>& commands, bool sweep,
                            uint64_t committed_batch) {
  while (!uncommitted_.empty() && uncommitted_.front()->id <= committed_batch) {
    uncommitted_.pop_front();
  }
  auto batch = std::make_shared<Batch>();
  Batch& b = *batch;
  b.id = next_batch_id_++;
  b.group = store_.NewWriteGroup();
  b.now_ms = clock_.NowMillis();
  b.expected_events = commands.size();
  for (auto& c : commands) c->Execute(*this, b);
  if (sweep) {
    ExpireResult ignored;
    DoExpire(b, ignored);
  }
  MutationLog& log = *b.mutations;
  for (const LevelEntry* level : b.dirty_levels) {
    FillLevel(level->first, level->second, &level_buffer_);
    log.PutMessage(Table::kStock, level->first, level_buffer_);
  }
  for (const auto& id : b.dirty_orders) log.PutMessage(Table::kOrders, id, b.orders[id]);
  if (!b.events.empty()) {
    b.last_sequence = next_sequence_ - 1;  // the journal entry goes in when it is sealed
  } else if (!log.empty()) {
    // Every change has its event (DESIGN section 3): a batch that changes a table without
    // one has no journal key. Refuse it rather than lose it; the pipeline stops (restart).
    b.broken =
        absl::InternalError("a batch changed the tables without an event; the server must restart");
  }
  b.commands = std::move(commands);
  stat_holds_.store(holds_.size(), std::memory_order_relaxed);
  stat_levels_.store(levels_.size(), std::memory_order_relaxed);
  uncommitted_.push_back(batch);
  return batch;
}

Event* WriterState::NewEvent(Batch& b, std::string_view type, std::string_view key) {
  std::shared_ptr<Event> e = NewBatchEvent(b, store_id_, next_sequence_++, type, key, b.actor);
  b.events.push_back(e);
  return e.get();
}

LevelEntry& WriterState::LevelAt(std::string_view key) {
  // absl's own string_view: the heterogeneous lookup, no std::string unless it is new.
  return *levels_.try_emplace(absl::string_view(key.data(), key.size())).first;
}

void WriterState::ChangeLevel(Batch& b, LevelEntry& entry, const LevelChange& change,
                              StockLevel* out) {
  Level& level = entry.second;
  const uint64_t sequence = next_sequence_++;
  level.on_hand += change.delta_on_hand;
  level.reserved += change.delta_reserved;
  level.version += 1;
  level.updated_at_ms = b.now_ms;
  level.sequence = sequence;
  b.dirty_levels.insert(&entry);
  // The event itself is built when the batch is sealed (batch_seal.h); its text is copied
  // now, as a hold's id and the caller's strings may be gone by then.
  auto text = [&b](std::string_view v) {
    PendingStockChange::Text t{static_cast<uint32_t>(b.pending_text.size()),
                               static_cast<uint32_t>(v.size())};
    b.pending_text.append(v);
    return t;
  };
  b.pending_changes.push_back(PendingStockChange{.event_index = b.events.size(),
                                                 .sequence = sequence,
                                                 .level_key = &entry.first,
                                                 .level = level,
                                                 .delta_on_hand = change.delta_on_hand,
                                                 .delta_reserved = change.delta_reserved,
                                                 .cause = change.cause,
                                                 .reservation_id = text(change.reservation_id),
                                                 .order_id = text(change.order_id),
                                                 .reason = text(change.reason),
                                                 .actor = text(b.actor)});
  b.events.emplace_back();  // the event's slot, filled by SealBatch
  if (out) FillLevel(entry.first, level, out);
}

absl::Status WriterState::CheckQuantities(const AggregatedLines& lines) const {
  for (const auto& line : lines) {
    if (line.quantity > options_.limits.max_quantity) {
      return absl::InvalidArgumentError(fmt::format("lines: total quantity for sku '{}' exceeds {}",
                                                    line.sku, options_.limits.max_quantity));
    }
  }
  return absl::OkStatus();
}

absl::Status WriterState::CheckAvailable(const AggregatedLines& lines,
                                         std::string_view field) const {
  for (const auto& line : lines) {
    auto it = levels_.find(line.key);
    if (it == levels_.end()) {
      return absl::NotFoundError(fmt::format("{}[{}]: no stock for sku '{}' at location '{}'",
                                             field, line.first_index, line.sku, line.location));
    }
    const Level& l = it->second;
    const int64_t available = l.on_hand - l.reserved;
    if (!l.allow_backorder && available < line.quantity) {
      return absl::FailedPreconditionError(fmt::format(
          "insufficient stock for sku '{}' at location '{}': requested {}, available {}", line.sku,
          line.location, line.quantity, std::max<int64_t>(available, 0)));
    }
  }
  return absl::OkStatus();
}

// Committing deducts the hold from on_hand, which never goes negative: a hold placed on
// backorder (beyond on_hand) can be committed once the stock has been received.
absl::Status WriterState::CheckCommittable(const OpenHold& hold) const {
  for (const auto& line : hold.second.lines) {
    auto it = levels_.find(line.level_key);
    const int64_t on_hand = it == levels_.end() ? 0 : it->second.on_hand;
    if (on_hand < line.quantity) {
      auto [sku, location] = SplitLevelKey(line.level_key);
      return absl::FailedPreconditionError(fmt::format(
          "reservation '{}' cannot be committed yet: sku '{}' at location '{}' has on_hand {}, "
          "the hold needs {} (backordered stock must be received first)",
          hold.first, sku, location, on_hand, line.quantity));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Reservation>> WriterState::FindClosed(Batch& b, const std::string& id,
                                                                   std::string* key_record) {
  const Batch::Closed* overlaid = FindInOverlays(b, [&](Batch& batch) -> const Batch::Closed* {
    auto it = batch.closed.find(id);
    return it == batch.closed.end() ? nullptr : &it->second;
  });
  if (overlaid != nullptr) {
    if (key_record != nullptr) *key_record = overlaid->key_record;
    return overlaid->reservation;
  }
  // Past the history retention a closed reservation is gone: its id is free again.
  return ReadHistoryRecord<Reservation>(overlay_.Get(Table::kReservations, id), "reservation",
                                        &ReservationExpired, b.now_ms,
                                        options_.history_retention_ms, key_record);
}

absl::Status WriterState::CheckReservationIdFree(Batch& b, const std::string& id) {
  auto closed = FindClosed(b, id);
  if (!closed.ok()) return closed.status();
  if (holds_.contains(id) || closed->has_value()) {
    return absl::AlreadyExistsError(fmt::format("reservation_id '{}' already exists", id));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenHold*> WriterState::HoldLines(
    Batch& b, AggregatedLines& lines, std::string id, const std::string& order_id, int64_t ttl_ms,
    bool owned_by_order, google::protobuf::RepeatedPtrField<StockLevel>* levels) {
  auto [it, inserted] = holds_.try_emplace(std::move(id));
  if (!inserted) {
    // Never expected (client ids are checked, generated ones carry a fresh sequence), but
    // adding to an open hold would corrupt it and the expiry index.
    return absl::InternalError(
        fmt::format("reservation_id '{}' is already an open hold", it->first));
  }
  OpenHold& hold = *it;
  Hold& h = hold.second;
  h.order_id = order_id;
  h.created_at_ms = b.now_ms;
  h.expires_at_ms = b.now_ms + (ttl_ms > 0 ? ttl_ms : options_.default_hold_ttl_ms);
  h.owned_by_order = owned_by_order;
  h.lines.reserve(lines.size());
  for (auto& line : lines) {
    LevelEntry& level = LevelAt(line.key);
    h.lines.push_back({std::move(line.key), line.quantity});
    ChangeLevel(b, level,
                LevelChange{.delta_reserved = line.quantity,
                            .cause = events::v1::STOCK_CHANGE_CAUSE_RESERVE,
                            .reservation_id = hold.first,
                            .order_id = order_id},
                levels ? levels->Add() : nullptr);
  }
  expiry_index_.emplace(h.expires_at_ms, hold.first);
  stat_reserved_.fetch_add(1, std::memory_order_relaxed);
  return &hold;
}

void WriterState::PutHold(Batch& b, const OpenHold& hold) {
  FillReservation(hold, &reservation_buffer_);
  b.mutations->PutMessage(Table::kHolds, hold.first, reservation_buffer_, {}, /*fresh=*/true,
                          hold.second.key_record);
}

const std::string& WriterState::ReservationIdPrefix() {
  if (reservation_id_prefix_.empty()) {
    reservation_id_prefix_.append(kGeneratedReservationPrefix)
        .append(options_.generated_id_tag.empty() ? store_id_.substr(0, 6)
                                                  : options_.generated_id_tag);
  }
  return reservation_id_prefix_;
}

absl::StatusOr<OpenHold*> WriterState::FindOpenHold(Batch& b, const std::string& id) {
  auto it = holds_.find(id);
  if (it == holds_.end()) {
    auto closed = FindClosed(b, id);
    if (!closed.ok()) return closed.status();
    if (closed->has_value()) {
      return absl::FailedPreconditionError(fmt::format("reservation '{}' is already {}", id,
                                                       ReservationStateName((*closed)->state())));
    }
    return absl::NotFoundError(fmt::format("reservation '{}' not found", id));
  }
  if (it->second.expires_at_ms <= b.now_ms) {
    return absl::FailedPreconditionError(
        fmt::format("reservation '{}' expired at {} ms", id, it->second.expires_at_ms));
  }
  return &*it;
}

Reservation WriterState::CloseHold(Batch& b, OpenHold& hold, inventory::v1::ReservationState state,
                                   events::v1::StockChangeCause cause, const std::string& reason,
                                   google::protobuf::RepeatedPtrField<StockLevel>* levels) {
  const bool commit = state == inventory::v1::RESERVATION_STATE_COMMITTED;
  for (const auto& line : hold.second.lines) {
    ChangeLevel(b, LevelAt(line.level_key),
                LevelChange{.delta_on_hand = commit ? -line.quantity : 0,
                            .delta_reserved = -line.quantity,
                            .cause = cause,
                            .reservation_id = hold.first,
                            .order_id = hold.second.order_id,
                            .reason = reason},
                levels ? levels->Add() : nullptr);
  }
  Reservation closed;
  FillReservation(hold, &closed);
  std::string key_record = std::move(hold.second.key_record);
  expiry_index_.erase({hold.second.expires_at_ms, hold.first});  // it views the key: first
  holds_.erase(closed.reservation_id());
  closed.set_state(state);
  closed.set_closed_at_ms(b.now_ms);
  closed.set_close_reason(reason);
  b.mutations->Delete(Table::kHolds, closed.reservation_id());
  // The key record stays with the closed reservation: a retried Reserve still finds it there.
  b.mutations->PutMessage(Table::kReservations, closed.reservation_id(), closed, {}, false,
                          key_record);
  b.closed[closed.reservation_id()] = Batch::Closed{closed, std::move(key_record)};
  return closed;
}

absl::StatusOr<Order*> WriterState::LoadOrder(Batch& b, const std::string& id) {
  if (auto it = b.orders.find(id); it != b.orders.end()) return &it->second;
  // An order changed by a batch still being committed: continue from that version.
  const Order* overlaid = FindInOverlays(b, [&](Batch& batch) -> const Order* {
    auto it = batch.orders.find(id);
    return it == batch.orders.end() ? nullptr : &it->second;
  });
  if (overlaid != nullptr) return &(b.orders[id] = *overlaid);
  auto stored = ReadHistoryRecord<Order>(overlay_.Get(Table::kOrders, id), "order", &OrderExpired,
                                         b.now_ms, options_.history_retention_ms);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return absl::NotFoundError(fmt::format("order '{}' not found", id));
  return &(b.orders[id] = std::move(**stored));
}

void WriterState::SetOrderStatus(Batch& b, Order& order, OrderStatus status,
                                 const std::string& details) {
  const OrderStatus previous = order.status();
  Event* e = NewEvent(b, event_types::kOrderStatusChanged, order.order_id());
  order.set_status(status);
  order.set_details(details);
  order.set_updated_at_ms(b.now_ms);
  order.set_sequence(e->sequence());
  auto* change = e->mutable_order_status_changed();
  change->set_order_id(order.order_id());
  change->set_customer_id(order.customer_id());
  change->set_status(status);
  change->set_status_name(std::string(OrderStatusName(status)));
  change->set_previous_status(previous);
  change->set_details(details);
  b.dirty_orders.insert(order.order_id());
}

}  // namespace feed::core

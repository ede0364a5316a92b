// What travels through the commit pipeline: commands, and the batch a round of them builds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "events/v1/events.pb.h"
#include "google/protobuf/arena.h"
#include "internal/v1/records.pb.h"
#include "inventory/v1/inventory.pb.h"
#include "mutation_log.h"
#include "order/v1/order.pb.h"
#include "records.h"
#include "storage/store.h"

namespace feed::core {

class WriterState;
struct Batch;

// One caller's command. Execute runs on the writer thread; Complete or Fail once, after the
// batch is committed (or failed), on the completer thread (the writer when idle).
struct Command {
  virtual ~Command() = default;
  virtual void Execute(WriterState& writer, Batch& batch) = 0;
  virtual void Complete() = 0;
  virtual void Fail(absl::Status status) = 0;
};

// A change of a stock level whose event the writer leaves to be built when the batch is
// sealed (batch_seal.h), by whichever thread writes it: the writer, every command's one
// stage, keeps only what the event needs. Text lives in Batch::pending_text.
struct PendingStockChange {
  size_t event_index = 0;  // its place in Batch::events
  uint64_t sequence = 0;
  const std::string* level_key = nullptr;  // a key of the writer's levels (never erased)
  Level level;                             // as the change left it
  int64_t delta_on_hand = 0;
  int64_t delta_reserved = 0;
  events::v1::StockChangeCause cause = events::v1::STOCK_CHANGE_CAUSE_UNSPECIFIED;
  struct Text {
    uint32_t at = 0, size = 0;
  };
  Text reservation_id, order_id, reason, actor;
};

// Everything a round of commands writes: its table changes and events, committed as one
// journal entry (journal.h).
struct Batch {
  uint64_t id = 0;  // increasing; the committer records the last committed one
  std::vector<std::unique_ptr<Command>> commands;
  // The table changes; once committed, the overlay keeps them until a checkpoint.
  std::shared_ptr<MutationLog> mutations = std::make_shared<MutationLog>();
  // What the commit writes: the journal entry (nothing when the batch changed nothing).
  std::unique_ptr<storage::WriteGroup> group;
  // The sealed entry's bytes, kept for the replicated log in cluster mode (replicated_log.h).
  std::string journal_entry;
  uint64_t last_sequence = 0;  // of its last event (0: none)
  // The batch's events live in one arena (one allocation for many events); each published
  // EventPtr shares ownership of it, so it is freed when the last reader drops its events.
  std::shared_ptr<google::protobuf::Arena> arena;
  size_t expected_events = 1;  // sizes the arena's first block
  // In sequence order; a pending stock change's slot stays empty until the batch is sealed.
  std::vector<std::shared_ptr<events::v1::Event>> events;
  std::vector<PendingStockChange> pending_changes;
  std::string pending_text;
  // The writer's levels this batch changed (entries of WriterState::levels_, which stay put).
  absl::flat_hash_set<const LevelEntry*> dirty_levels;
  // Overlays: what earlier commands of this batch wrote, not yet visible in the store.
  absl::flat_hash_map<std::string, order::v1::Order> orders;
  absl::flat_hash_set<std::string> dirty_orders;
  // Idempotency keys recorded by this batch: the index of the record's put in `mutations`.
  absl::flat_hash_map<std::string, uint32_t> idempotency;
  // Reservations closed by this batch, with the key record each hold carried (records.h).
  struct Closed {
    inventory::v1::Reservation reservation;
    std::string key_record;
  };
  absl::flat_hash_map<std::string, Closed> closed;
  int64_t now_ms = 0;
  // The actor of the command being applied (CallContext::actor): set on each event it writes.
  std::string_view actor;
  absl::Status commit_status;  // set by whoever wrote the batch, before it is completed
  absl::Status broken;         // set by the writer when the batch must not be committed
};

using BatchPtr = std::shared_ptr<Batch>;

}  // namespace feed::core

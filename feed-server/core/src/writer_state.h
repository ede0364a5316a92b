// The writer's state and everything that changes it: stock levels, open holds and their
// expiry index, the next sequence, and the command handlers. Owned by the writer thread
// (CommitPipeline's stage 1): nothing here is locked, and nothing else may touch it once the
// pipeline has started (the stats atomics excepted).
//
// Split by concern: writer_state.cc (building a batch and its primitives), commands.cc (the
// handlers), idempotency.{h,cc}, recovery.cc. What the writer leaves for the thread that
// writes a batch (its stock events, its journal entry) is batch_seal.{h,cc}.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "batch.h"
#include "core/clock.h"
#include "core/inventory_core.h"
#include "core/options.h"
#include "records.h"
#include "storage/store.h"
#include "table_overlay.h"

namespace feed::core {

// One broken invariant (admin.v1.Violation's kinds).
struct InvariantViolation {
  std::string kind;
  std::string key;
  std::string message;
};

// One change of one level, as its event records it.
struct LevelChange {
  int64_t delta_on_hand = 0;
  int64_t delta_reserved = 0;
  events::v1::StockChangeCause cause = events::v1::STOCK_CHANGE_CAUSE_UNSPECIFIED;
  std::string_view reservation_id;
  std::string_view order_id;
  std::string_view reason;
};

class WriterState {
 public:
  // Records not in the store's tables yet are read through `overlay`.
  WriterState(storage::Store& store, TableOverlay& overlay, const Clock& clock,
              const CoreOptions& options)
      : store_(store), overlay_(overlay), clock_(clock), options_(options) {}

  // Before the pipeline starts: reads the tables (levels, open holds, as of the last
  // checkpoint), replays the journal entries after it into this state and the overlay, and
  // checks the invariants of DESIGN section 3.
  struct Recovered {
    uint64_t last_sequence = 0;        // the last committed sequence
    uint64_t checkpoint_sequence = 0;  // what the tables include
    size_t replayed_entries = 0;
    int64_t tables_ms = 0;  // reading the tables took
  };
  absl::StatusOr<Recovered> Recover();

  // The same reading without writing anything or checking: what an audit (store_audit.h)
  // runs on a snapshot. Fills `out` except last_sequence when the reading fails.
  absl::Status Load(Recovered* out);
  // The invariants of DESIGN section 3 over the loaded levels and holds, and stored levels
  // whose `available` is not on_hand - reserved: appends up to `max` violations to `out`,
  // returns how many there are.
  size_t FindViolations(size_t max, std::vector<InvariantViolation>* out) const;

  // Writer thread: runs `commands` (and the expiry sweep) into a new batch, which takes the
  // commands. `committed_batch` is the newest batch known to be committed (its overlays and
  // those of older batches are in the store now).
  BatchPtr Apply(std::vector<std::unique_ptr<Command>>& commands, bool sweep,
                 uint64_t committed_batch);

  // A command handler: checks everything first, then changes state; an error leaves no
  // trace. Writer thread.
  template <class Req, class Resp>
  using Handler = absl::Status (WriterState::*)(Req&, Batch&, Resp&);
  // Runs `handler` at most once per idempotency key (idempotency.h).
  template <class Req, class Resp>
  absl::StatusOr<Resp> RunIdempotent(std::string_view method, uint64_t fingerprint, Req& request,
                                     Batch& b, Handler<Req, Resp> handler);

  absl::Status DoAdjust(inventory::v1::AdjustStockRequest& r, Batch& b,
                        inventory::v1::AdjustStockResponse& out);
  absl::Status DoReserve(inventory::v1::ReserveRequest& r, Batch& b,
                         inventory::v1::ReserveResponse& out);
  absl::Status DoCommit(inventory::v1::CommitRequest& r, Batch& b,
                        inventory::v1::CommitResponse& out);
  absl::Status DoRelease(inventory::v1::ReleaseRequest& r, Batch& b,
                         inventory::v1::ReleaseResponse& out);
  absl::Status DoCreateOrder(order::v1::CreateOrderRequest& r, Batch& b,
                             order::v1::CreateOrderResponse& out);
  absl::Status DoPayOrder(order::v1::PayOrderRequest& r, Batch& b, order::v1::OrderResponse& out);
  absl::Status DoAdvanceOrder(order::v1::AdvanceOrderRequest& r, Batch& b,
                              order::v1::OrderResponse& out);
  absl::Status DoCancelOrder(order::v1::CancelOrderRequest& r, Batch& b,
                             order::v1::OrderResponse& out);
  void DoExpire(Batch& b, ExpireResult& out);

  // Set by recovery, then constant: any thread may read it once the pipeline runs.
  const std::string& store_id() const { return store_id_; }

  // Any thread.
  size_t open_holds() const { return stat_holds_.load(std::memory_order_relaxed); }
  size_t stock_levels() const { return stat_levels_.load(std::memory_order_relaxed); }
  uint64_t reservations_made() const { return stat_reserved_.load(std::memory_order_relaxed); }

 private:
  events::v1::Event* NewEvent(Batch& b, std::string_view type, std::string_view key);
  // Recovery: the store's meta (store id, format, sequences), its levels and open holds, the
  // journal after the checkpoint, the indexes and the invariants.
  // Recover and Load without the checks: meta, the tables, the journal after the checkpoint.
  absl::Status LoadState(Recovered* out, bool write_meta);
  // `write`: a new store gets its id and format record (Recover); an audit writes nothing.
  absl::Status RecoverMeta(uint64_t* checkpoint_sequence, bool write);
  absl::Status LoadTables();
  absl::StatusOr<size_t> ReplayJournal(uint64_t checkpoint_sequence);
  absl::Status CheckInvariants();
  // A stored level record whose derived `available` disagrees (what LoadTables and
  // ReplayJournal saw; recovery recomputes the field, an audit reports it).
  void NoteStoredLevel(std::string_view key, const inventory::v1::StockLevel& record);
  // The entry of `key` in levels_ (a new, empty level if there is none).
  LevelEntry& LevelAt(std::string_view key);
  void ChangeLevel(Batch& b, LevelEntry& level, const LevelChange& change,
                   inventory::v1::StockLevel* out);
  absl::Status CheckQuantities(const AggregatedLines& lines) const;
  absl::Status CheckAvailable(const AggregatedLines& lines, std::string_view field) const;
  absl::Status CheckCommittable(const OpenHold& hold) const;
  absl::Status CheckReservationIdFree(Batch& b, const std::string& id);
  // Places a new hold under `id`, which the caller has found free; an id in use fails
  // (INTERNAL) before anything changes. The hold takes the lines' keys over. Its record is
  // written by PutHold, once the caller has set what the hold carries.
  absl::StatusOr<OpenHold*> HoldLines(
      Batch& b, AggregatedLines& lines, std::string id, const std::string& order_id, int64_t ttl_ms,
      bool owned_by_order, google::protobuf::RepeatedPtrField<inventory::v1::StockLevel>* levels);
  void PutHold(Batch& b, const OpenHold& hold);
  absl::StatusOr<OpenHold*> FindOpenHold(Batch& b, const std::string& id);
  // "rsv-" and CoreOptions::generated_id_tag (default: the store id's first 6 characters): a
  // generated reservation id is this, '-' and the sequence of its first event.
  const std::string& ReservationIdPrefix();
  inventory::v1::Reservation CloseHold(
      Batch& b, OpenHold& hold, inventory::v1::ReservationState state,
      events::v1::StockChangeCause cause, const std::string& reason,
      google::protobuf::RepeatedPtrField<inventory::v1::StockLevel>* levels);
  // A closed reservation, and its key record into `*key_record` when that is given.
  absl::StatusOr<std::optional<inventory::v1::Reservation>> FindClosed(
      Batch& b, const std::string& id, std::string* key_record = nullptr);
  absl::StatusOr<order::v1::Order*> LoadOrder(Batch& b, const std::string& id);
  void SetOrderStatus(Batch& b, order::v1::Order& order, order::v1::OrderStatus status,
                      const std::string& details);
  absl::StatusOr<std::optional<internal::v1::IdempotencyRecord>> FindIdempotency(
      Batch& b, const std::string& key);
  // Whether Reserve may derive a reservation id from its idempotency key: only while a closed
  // reservation outlives the key's retention, which the reservation then stands for.
  bool DerivesReservationIds() const;
  // ReservationIdPrefix(), "-k" and 16 hex digits of a stable hash of `key`.
  std::string KeyedReservationId(const std::string& key);
  // The key's record kept in the reservation named by KeyedReservationId(key), if that
  // reservation was made with this key within the retention; sets keyed_'s derived id.
  absl::StatusOr<std::optional<internal::v1::IdempotencyRecord>> FindKeyInReservation(
      Batch& b, const std::string& key);
  // Reserve's half of a derived id: `hold` carries its key's record, with `response`.
  void RecordKeyInHold(Batch& b, OpenHold& hold, const inventory::v1::ReserveResponse& response);
  // What `find` (Batch& -> pointer or nullptr) finds in `b`'s overlays or else in the newest
  // uncommitted batch that has it: what earlier commands wrote that the store has not yet.
  template <class Fn>
  auto FindInOverlays(Batch& b, Fn&& find) {
    auto* found = find(b);
    for (auto older = uncommitted_.rbegin(); found == nullptr && older != uncommitted_.rend();
         ++older) {
      found = find(**older);
    }
    return found;
  }

  storage::Store& store_;
  TableOverlay& overlay_;
  const Clock& clock_;
  const CoreOptions& options_;

  // node_hash_map: a level's entry stays where it is (levels are never erased), so a batch
  // marks the levels it changed by address (Batch::dirty_levels).
  absl::node_hash_map<std::string, Level> levels_;
  // node_hash_map: references stay valid across inserts and erases of other holds, so the
  // expiry index (and recovery's sums) can view the ids and level keys inside the nodes.
  absl::node_hash_map<std::string, Hold> holds_;
  // {expires_at_ms, reservation id viewing the key in holds_}; an entry is erased before
  // its hold.
  absl::btree_set<std::pair<int64_t, std::string_view>> expiry_index_;
  uint64_t next_sequence_ = 1;
  uint64_t next_batch_id_ = 1;
  std::string store_id_;
  std::string reservation_id_prefix_;  // ReservationIdPrefix(), once the store id is known
  // Batches handed on and not yet known to be committed, oldest first: their overlays stay
  // visible to lookups until the store has their writes.
  std::deque<BatchPtr> uncommitted_;
  // Reused for every record: MutationLog copies the bytes, and a reused message keeps its
  // strings' capacity.
  inventory::v1::StockLevel level_buffer_;
  inventory::v1::Reservation reservation_buffer_;
  internal::v1::IdempotencyRecord idempotency_buffer_;
  internal::v1::ReservationKeyRecord key_record_buffer_;
  // The command RunIdempotent is running, for Reserve to take its id from (idempotency.h):
  // what FindIdempotency found of the key's derived id, then the key while the handler runs.
  struct KeyedCommand {
    std::string derived_id;            // KeyedReservationId(key), when FindIdempotency looked
    bool derived_id_free = false;      // no reservation, open or closed, has that id
    const std::string* key = nullptr;  // nullptr: no key, or no handler running
    std::string_view method;
    uint64_t fingerprint = 0;
    bool recorded = false;  // the handler kept the key's record in its reservation
  } keyed_;

  // Stored levels whose `available` field is off (NoteStoredLevel).
  struct StaleAvailable {
    std::string key;
    int64_t available, computed;
  };
  std::vector<StaleAvailable> stale_available_;

  std::atomic<size_t> stat_holds_{0}, stat_levels_{0};
  std::atomic<uint64_t> stat_reserved_{0};
};

}  // namespace feed::core

// The inventory core: the single writer (sequencer) that owns every mutation, plus reads
// of committed state. No gRPC types: adapters translate.
//
// Mutations are asynchronous: each call validates its request on the caller's thread, queues
// a command and returns; `done` runs once the result is durable, and must not block.
//
// Threads (src/commit_pipeline.h has the stage rules):
// clang-format off
//   feed-writer      the commands against the in-memory state, one batch at a time; writes
//                    and answers a batch itself when everything is idle (then `done` runs
//                    here). Blocks on a full commit hand-off (16 batches in flight).
//   feed-committer   seals every waiting batch (its stock events and journal entry built
//                    from the writer's flat records), Store::Commit of each, one WAL sync;
//                    the overlay takes their records. Blocks on the disk.
//   feed-completer   each command's `done`, in commit order. Blocks when the publisher is
//                    64k events behind.
//   feed-publisher   ChangeFeed::Publish: every ChangeListener::OnEvents.
//   feed-checkpoint  the overlay's records into the store's tables; journal trimming.
//   callers          validation, Fingerprint, GetStock and the other reads (the overlay,
//                    then the store).
// clang-format on
//
// Idempotency: a mutation whose request carries an idempotency_key is applied at most once
// per key within options.idempotency_retention_ms; the same key with the same request gets
// the first response back (replayed = true), with a different request ALREADY_EXISTS. Failed
// commands change nothing and record nothing, so they may be retried with the same key.
//
// Errors: INVALID_ARGUMENT (names the field), NOT_FOUND, FAILED_PRECONDITION (insufficient
// stock names the SKU and what is available; wrong state names the state), ALREADY_EXISTS,
// RESOURCE_EXHAUSTED (writer queue full), UNAVAILABLE (shutting down or storage failed).
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "core/change_feed.h"
#include "core/clock.h"
#include "core/options.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "storage/store.h"

namespace feed::core {

template <class T>
using Done = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

// Asked by the writer just before it applies a command: true means the caller is gone (call
// cancelled or past its deadline), so the command is skipped and completes with CANCELLED.
// Must be cheap and thread-safe. Empty = never cancelled.
using CancelFn = std::function<bool()>;

// What a caller adds to a mutation besides its request.
struct CallContext {
  // Empty = never cancelled.
  CancelFn cancelled;
  // Who asks (the authenticated subject; empty when authentication is off): recorded as the
  // `actor` of every event the command writes.
  std::string actor;
};

// A call that cannot be cancelled, made by `actor`.
inline CallContext ActingAs(std::string actor) {
  CallContext call;
  call.actor = std::move(actor);
  return call;
}

// The actor of the events of holds and orders the server expires itself.
inline constexpr std::string_view kExpiryActor = "system:expiry";

struct ExpireResult {
  size_t expired_holds = 0;
  size_t expired_orders = 0;
};

struct CoreStats {
  uint64_t batches = 0;
  uint64_t commands = 0;
  uint64_t events = 0;
  size_t queue_depth = 0;         // commands waiting for the writer
  size_t unpublished_events = 0;  // events of answered commands waiting for the publisher
  size_t held_reservations = 0;
  size_t stock_levels = 0;
  uint64_t reservations_made = 0;  // holds placed since start (orders' included)
  uint64_t last_sequence = 0;
  // Committed records not yet in the store's tables (they are in the journal), and the last
  // checkpoint that moved such records there.
  size_t overlay_records = 0;
  size_t overlay_bytes = 0;
  uint64_t checkpoints = 0;
  uint64_t checkpoint_sequence = 0;
};

class InventoryCore {
 public:
  // Recovers state from `store` (stock levels, open holds, next sequence), checks the
  // invariants, turns on the store's compactions (Store::StartCompactions), and starts the
  // writer, committer, completer and publisher threads. `store` and `clock` must outlive
  // the core.
  static absl::StatusOr<std::unique_ptr<InventoryCore>> Open(storage::Store& store,
                                                             const Clock& clock,
                                                             const CoreOptions& options);
  ~InventoryCore();

  // Stops accepting commands (UNAVAILABLE), applies and completes those already queued,
  // stops the writer, and writes a last checkpoint. Idempotent.
  void Shutdown();

  // Writes every record committed before the call into the store's tables (which otherwise
  // follow the journal by up to options.checkpoint_interval_ms); returns once they are there.
  // Commands keep flowing meanwhile. Any thread.
  absl::Status Checkpoint();

  void AdjustStock(inventory::v1::AdjustStockRequest request,
                   Done<inventory::v1::AdjustStockResponse> done, CallContext call = {});
  // Each adjustment applied or refused on its own, in order, in one batch of the writer; an
  // adjustment's idempotency_key works as in AdjustStock (the same keys). The call fails only
  // when the request is empty or over limits.max_batch_adjustments.
  void BatchAdjustStock(inventory::v1::BatchAdjustStockRequest request,
                        Done<inventory::v1::BatchAdjustStockResponse> done, CallContext call = {});
  void Reserve(inventory::v1::ReserveRequest request, Done<inventory::v1::ReserveResponse> done,
               CallContext call = {});
  void Commit(inventory::v1::CommitRequest request, Done<inventory::v1::CommitResponse> done,
              CallContext call = {});
  void Release(inventory::v1::ReleaseRequest request, Done<inventory::v1::ReleaseResponse> done,
               CallContext call = {});
  void CreateOrder(order::v1::CreateOrderRequest request, Done<order::v1::CreateOrderResponse> done,
                   CallContext call = {});
  void PayOrder(order::v1::PayOrderRequest request, Done<order::v1::OrderResponse> done,
                CallContext call = {});
  void AdvanceOrder(order::v1::AdvanceOrderRequest request, Done<order::v1::OrderResponse> done,
                    CallContext call = {});
  void CancelOrder(order::v1::CancelOrderRequest request, Done<order::v1::OrderResponse> done,
                   CallContext call = {});
  // Expires the holds (and their CONFIRMED orders) whose expires_at <= clock now.
  void ExpireDue(Done<ExpireResult> done);

  // Reads of committed state; any thread, never through the writer.
  absl::StatusOr<inventory::v1::GetStockResponse> GetStock(
      const inventory::v1::GetStockRequest& request) const;
  absl::StatusOr<inventory::v1::Reservation> GetReservation(std::string_view id) const;
  absl::StatusOr<order::v1::Order> GetOrder(std::string_view id) const;
  // A consistent point-in-time view of the levels matching `filter` (empty = every level;
  // an empty location = every location of the SKU), read in chunks so that a stream can send
  // a large snapshot without holding it in memory.
  class StockSnapshot {
   public:
    virtual ~StockSnapshot() = default;
    // The last sequence the view includes: changes after it are not in the snapshot.
    virtual uint64_t as_of_sequence() const = 0;
    // Appends up to `max` levels; returns false once the snapshot is exhausted.
    virtual absl::StatusOr<bool> Next(size_t max, std::vector<inventory::v1::StockLevel>* out) = 0;
  };
  absl::StatusOr<std::unique_ptr<StockSnapshot>> OpenStockSnapshot(
      std::vector<inventory::v1::StockKey> filter) const;

  ChangeFeed& change_feed();
  const CoreOptions& options() const;
  CoreStats stats() const;
  // OK while the core accepts commands.
  absl::Status health() const;

 private:
  class Impl;
  explicit InventoryCore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Blocking convenience for tests, tools and benchmarks: calls `method` and waits.
template <class Resp, class Req>
absl::StatusOr<Resp> CallSync(InventoryCore& core,
                              void (InventoryCore::*method)(Req, Done<Resp>, CallContext),
                              Req request) {
  std::promise<absl::StatusOr<Resp>> promise;
  auto future = promise.get_future();
  (core.*method)(std::move(request),
                 [&promise](absl::StatusOr<Resp> r) { promise.set_value(std::move(r)); }, {});
  return future.get();
}

// The seed's status strings ("CONFIRMED", "PACKING", ...).
std::string_view OrderStatusName(order::v1::OrderStatus status);
bool IsTerminal(order::v1::OrderStatus status);

}  // namespace feed::core

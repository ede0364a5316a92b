// The inventory core's facade: Open, the commands (validated here, on the caller's thread,
// then queued for the writer), the reads and the stats. See inventory_core.h for the
// contract, commit_pipeline.h for the threads, writer_state.h for the state they change.
#include "core/inventory_core.h"

#include "batch_seal.h"
#include "checkpointer.h"
#include "commit_pipeline.h"
#include "core/history.h"
#include "core/level_key.h"
#include "core/validation.h"
#include "fmt/format.h"
#include "idempotency.h"
#include "journal.h"
#include "logging.h"
#include "reads.h"
#include "stock_history.h"
#include "table_overlay.h"
#include "writer_state.h"

namespace feed::core {

using inventory::v1::Reservation;
using order::v1::Order;
using order::v1::OrderStatus;
using storage::Table;

std::string_view OrderStatusName(OrderStatus status) {
  switch (status) {
    case order::v1::ORDER_STATUS_CONFIRMED:
      return "CONFIRMED";
    case order::v1::ORDER_STATUS_PAID:
      return "PAID";
    case order::v1::ORDER_STATUS_PACKING:
      return "PACKING";
    case order::v1::ORDER_STATUS_DISPATCHED:
      return "DISPATCHED";
    case order::v1::ORDER_STATUS_DELIVERED:
      return "DELIVERED";
    case order::v1::ORDER_STATUS_CANCELLED:
      return "CANCELLED";
    case order::v1::ORDER_STATUS_EXPIRED:
      return "EXPIRED";
    default:
      return "UNSPECIFIED";
  }
}

bool IsTerminal(OrderStatus status) {
  return status == order::v1::ORDER_STATUS_DELIVERED ||
         status == order::v1::ORDER_STATUS_CANCELLED || status == order::v1::ORDER_STATUS_EXPIRED;
}

namespace {

// The method name idempotency records carry for an adjustment, alone or in a batch (so a key
// used in one is replayed in the other).
constexpr std::string_view kAdjustMethod = "inventory.v1.AdjustStock";

// A caller's request on its way through the pipeline.
template <class Req, class Resp>
struct RpcCommand final : Command {
  std::string_view method;
  WriterState::Handler<Req, Resp> handler;
  Req request;
  uint64_t fingerprint = 0;
  Done<Resp> done;
  CallContext call;
  // Set by Execute; a message-less status here costs no allocation per command.
  absl::StatusOr<Resp> result = absl::Status(absl::StatusCode::kInternal, "");

  void Execute(WriterState& writer, Batch& b) override {
    if (call.cancelled && call.cancelled()) {
      result = absl::CancelledError("the call was cancelled or its deadline passed before it ran");
      return;
    }
    b.actor = call.actor;
    result = writer.RunIdempotent<Req, Resp>(method, fingerprint, request, b, handler);
    b.actor = {};
  }
  void Complete() override { std::move(done)(std::move(result)); }
  void Fail(absl::Status status) override { std::move(done)(std::move(status)); }
};

// The adjustments of one BatchAdjustStock call that passed validation; the response holds
// the others' errors already, in their places.
struct BatchAdjustCommand final : Command {
  struct Item {
    int index;  // in the request and the response
    inventory::v1::AdjustStockRequest request;
    uint64_t fingerprint = 0;
  };
  std::vector<Item> items;
  inventory::v1::BatchAdjustStockResponse response;
  Done<inventory::v1::BatchAdjustStockResponse> done;
  CallContext call;

  void Execute(WriterState& writer, Batch& b) override {
    const bool cancelled = call.cancelled && call.cancelled();
    b.actor = call.actor;
    for (auto& item : items) {
      auto* result = response.mutable_results(item.index);
      if (cancelled) {
        result->set_code(static_cast<int>(absl::StatusCode::kCancelled));
        result->set_message("the call was cancelled or its deadline passed before it ran");
        continue;
      }
      auto r =
          writer
              .RunIdempotent<inventory::v1::AdjustStockRequest, inventory::v1::AdjustStockResponse>(
                  kAdjustMethod, item.fingerprint, item.request, b, &WriterState::DoAdjust);
      if (r.ok()) {
        *result->mutable_response() = *std::move(r);
      } else {
        result->set_code(static_cast<int>(r.status().code()));
        result->set_message(
            fmt::format("adjustments[{}]: {}", item.index, std::string(r.status().message())));
      }
    }
    b.actor = {};
  }
  void Complete() override { std::move(done)(std::move(response)); }
  void Fail(absl::Status status) override { std::move(done)(std::move(status)); }
};

struct ExpireCommand final : Command {
  Done<ExpireResult> done;
  ExpireResult result;
  void Execute(WriterState& writer, Batch& b) override { writer.DoExpire(b, result); }
  void Complete() override { std::move(done)(result); }
  void Fail(absl::Status status) override { std::move(done)(std::move(status)); }
};

// A snapshot of the levels matching a filter, as of the last committed sequence.
class OverlayStockSnapshot final : public InventoryCore::StockSnapshot {
 public:
  OverlayStockSnapshot(std::unique_ptr<storage::ReadView> view, uint64_t as_of,
                       std::vector<inventory::v1::StockKey> filter)
      : view_(std::move(view)), as_of_(as_of), reader_(*view_, std::move(filter)) {}
  uint64_t as_of_sequence() const override { return as_of_; }
  absl::StatusOr<bool> Next(size_t max, std::vector<inventory::v1::StockLevel>* out) override {
    return reader_.Next(max, out);
  }

 private:
  std::unique_ptr<storage::ReadView> view_;
  uint64_t as_of_;
  LevelReader reader_;
};

}  // namespace

class InventoryCore::Impl {
 public:
  Impl(storage::Store& store, const Clock& clock, const CoreOptions& options)
      : store_(store),
        clock_(clock),
        options_(options),
        feed_(options.change_feed_retention),
        overlay_(store),
        checkpointer_(store, overlay_, clock, options_),
        writer_(store, overlay_, clock, options_),
        pipeline_(store, clock, options_,
                  CommitPipeline::Stages{
                      .apply =
                          [this](std::vector<std::unique_ptr<Command>>& commands, bool sweep) {
                            return writer_.Apply(commands, sweep, pipeline_.committed_batch());
                          },
                      .seal = [this](Batch& b) { SealBatch(b, writer_.store_id()); },
                      .committed =
                          [this](const Batch& b) {
                            if (b.last_sequence == 0) return;
                            checkpointer_.Committed(overlay_.Apply(b.mutations, b.last_sequence));
                          },
                      .publish =
                          [this](const std::vector<EventPtr>& events) { feed_.Publish(events); }}) {
  }

  // Validates on the caller's thread, then queues the command for the writer.
  template <class Req, class Resp, class Validate>
  void Submit(std::string_view method, Req request, Done<Resp> done, CallContext call,
              Validate validate, WriterState::Handler<Req, Resp> handler) {
    if (absl::Status s = validate(request, options_); !s.ok()) {
      std::move(done)(std::move(s));
      return;
    }
    auto command = std::make_unique<RpcCommand<Req, Resp>>();
    command->method = method;
    command->handler = handler;
    if (!request.idempotency_key().empty()) command->fingerprint = Fingerprint(method, request);
    command->request = std::move(request);
    command->done = std::move(done);
    command->call = std::move(call);
    pipeline_.Enqueue(std::move(command));
  }

  storage::Store& store_;
  const Clock& clock_;
  const CoreOptions options_;
  ChangeFeed feed_;
  TableOverlay overlay_;
  Checkpointer checkpointer_;
  WriterState writer_;  // the writer thread's, once the pipeline runs
  CommitPipeline pipeline_;
};

InventoryCore::InventoryCore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InventoryCore::~InventoryCore() { Shutdown(); }

absl::StatusOr<std::unique_ptr<InventoryCore>> InventoryCore::Open(storage::Store& store,
                                                                   const Clock& clock,
                                                                   const CoreOptions& options) {
  if (options.max_batch_commands == 0) {
    return absl::InvalidArgumentError("max_batch_commands must be at least 1");
  }
  if (options.checkpoint_bytes == 0) {
    return absl::InvalidArgumentError("checkpoint_bytes must be at least 1");
  }
  auto impl = std::make_unique<Impl>(store, clock, options);
  absl::StatusOr<WriterState::Recovered> recovered = impl->writer_.Recover();
  // Compaction was held back (if the store defers it) while recovery read every table.
  store.StartCompactions();
  if (!recovered.ok()) return recovered.status();
  impl->overlay_.SetLastSequence(recovered->last_sequence);
  impl->checkpointer_.Start(recovered->checkpoint_sequence);
  // What was replayed goes into the tables now: the store at rest after any start is whole.
  if (recovered->replayed_entries > 0) {
    if (absl::Status s = impl->checkpointer_.Checkpoint(); !s.ok()) return s;
  }
  // The newest events still in the journal (not yet trimmed): streams open before a restart
  // resume from them instead of starting over with a snapshot.
  const uint64_t last = recovered->last_sequence;
  const uint64_t keep = std::min<uint64_t>(options.change_feed_retention, last);
  auto retained = keep == 0 ? absl::StatusOr<std::vector<EventPtr>>(std::vector<EventPtr>{})
                            : ReadJournalEvents(store, last - keep + 1, last);
  if (!retained.ok()) return retained.status();
  impl->feed_.Reset(last, *std::move(retained));
  impl->pipeline_.Start();
  return std::unique_ptr<InventoryCore>(new InventoryCore(std::move(impl)));
}

void InventoryCore::Shutdown() {
  impl_->pipeline_.Shutdown();
  if (absl::Status s = impl_->checkpointer_.Shutdown(); !s.ok()) {
    CoreLogger()->error("last checkpoint failed: {}; the next start replays the journal",
                        s.ToString());
  }
}

absl::Status InventoryCore::Checkpoint() { return impl_->checkpointer_.Checkpoint(); }

void InventoryCore::AdjustStock(inventory::v1::AdjustStockRequest request,
                                Done<inventory::v1::AdjustStockResponse> done, CallContext call) {
  impl_->Submit(kAdjustMethod, std::move(request), std::move(done), std::move(call),
                &ValidateAdjust, &WriterState::DoAdjust);
}

void InventoryCore::BatchAdjustStock(inventory::v1::BatchAdjustStockRequest request,
                                     Done<inventory::v1::BatchAdjustStockResponse> done,
                                     CallContext call) {
  const size_t n = static_cast<size_t>(request.adjustments_size());
  const size_t limit = impl_->options_.limits.max_batch_adjustments;
  if (n == 0 || n > limit) {
    std::move(done)(absl::InvalidArgumentError(fmt::format(
        "adjustments: {} given; a batch holds 1 to {} (--max-batch-adjustments)", n, limit)));
    return;
  }
  auto command = std::make_unique<BatchAdjustCommand>();
  command->items.reserve(n);
  for (int i = 0; i < static_cast<int>(n); ++i) {
    auto* result = command->response.add_results();
    inventory::v1::AdjustStockRequest& item = *request.mutable_adjustments(i);
    if (absl::Status s = ValidateAdjust(item, impl_->options_); !s.ok()) {
      result->set_code(static_cast<int>(s.code()));
      result->set_message(fmt::format("adjustments[{}].{}", i, std::string(s.message())));
      continue;
    }
    BatchAdjustCommand::Item& valid = command->items.emplace_back();
    valid.index = i;
    if (!item.idempotency_key().empty()) valid.fingerprint = Fingerprint(kAdjustMethod, item);
    valid.request = std::move(item);
  }
  command->done = std::move(done);
  command->call = std::move(call);
  impl_->pipeline_.Enqueue(std::move(command));
}

void InventoryCore::Reserve(inventory::v1::ReserveRequest request,
                            Done<inventory::v1::ReserveResponse> done, CallContext call) {
  impl_->Submit("inventory.v1.Reserve", std::move(request), std::move(done), std::move(call),
                &ValidateReserve, &WriterState::DoReserve);
}

void InventoryCore::Commit(inventory::v1::CommitRequest request,
                           Done<inventory::v1::CommitResponse> done, CallContext call) {
  impl_->Submit("inventory.v1.Commit", std::move(request), std::move(done), std::move(call),
                &ValidateCommit, &WriterState::DoCommit);
}

void InventoryCore::Release(inventory::v1::ReleaseRequest request,
                            Done<inventory::v1::ReleaseResponse> done, CallContext call) {
  impl_->Submit("inventory.v1.Release", std::move(request), std::move(done), std::move(call),
                &ValidateRelease, &WriterState::DoRelease);
}

void InventoryCore::CreateOrder(order::v1::CreateOrderRequest request,
                                Done<order::v1::CreateOrderResponse> done, CallContext call) {
  impl_->Submit("order.v1.CreateOrder", std::move(request), std::move(done), std::move(call),
                &ValidateCreateOrder, &WriterState::DoCreateOrder);
}

void InventoryCore::PayOrder(order::v1::PayOrderRequest request,
                             Done<order::v1::OrderResponse> done, CallContext call) {
  impl_->Submit("order.v1.PayOrder", std::move(request), std::move(done), std::move(call),
                &ValidatePayOrder, &WriterState::DoPayOrder);
}

void InventoryCore::AdvanceOrder(order::v1::AdvanceOrderRequest request,
                                 Done<order::v1::OrderResponse> done, CallContext call) {
  impl_->Submit("order.v1.AdvanceOrder", std::move(request), std::move(done), std::move(call),
                &ValidateAdvanceOrder, &WriterState::DoAdvanceOrder);
}

void InventoryCore::CancelOrder(order::v1::CancelOrderRequest request,
                                Done<order::v1::OrderResponse> done, CallContext call) {
  impl_->Submit("order.v1.CancelOrder", std::move(request), std::move(done), std::move(call),
                &ValidateCancelOrder, &WriterState::DoCancelOrder);
}

void InventoryCore::ExpireDue(Done<ExpireResult> done) {
  auto command = std::make_unique<ExpireCommand>();
  command->done = std::move(done);
  impl_->pipeline_.Enqueue(std::move(command));
}

absl::StatusOr<inventory::v1::GetStockResponse> InventoryCore::GetStock(
    const inventory::v1::GetStockRequest& request) const {
  if (HasSkuShorthand(request)) {
    inventory::v1::GetStockRequest expanded = request;
    if (absl::Status s = ExpandSkuShorthand(&expanded); !s.ok()) return s;
    return GetStock(expanded);
  }
  if (absl::Status s = ValidateGetStock(request, impl_->options_); !s.ok()) return s;
  inventory::v1::GetStockResponse response;
  uint64_t now_sequence = 0;
  absl::Status s = impl_->overlay_.Read([&](const storage::ReadView& view, uint64_t as_of) {
    now_sequence = as_of;
    LevelReader reader(view, {request.keys().begin(), request.keys().end()});
    std::vector<inventory::v1::StockLevel> levels;
    auto read = reader.Next(SIZE_MAX, &levels,
                            [&](const inventory::v1::StockKey& k) { *response.add_missing() = k; });
    if (!read.ok()) return read.status();
    for (auto& l : levels) *response.add_levels() = std::move(l);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (request.as_of_sequence() > 0) {
    if (request.as_of_sequence() > now_sequence) {
      return absl::OutOfRangeError(
          fmt::format("as_of_sequence: {} is after the last committed sequence {}",
                      request.as_of_sequence(), now_sequence));
    }
    // Outside the overlay's read: the journal scan may be long, and commits wait on a read.
    // Every change the levels above show is in the journal already (it is committed first).
    s = RewindLevels(impl_->store_, request.as_of_sequence(), now_sequence, &response);
    if (!s.ok()) return s;
  }
  return response;
}

absl::StatusOr<Reservation> InventoryCore::GetReservation(std::string_view id) const {
  if (absl::Status s = ValidateId("reservation_id", id, impl_->options_.limits); !s.ok()) return s;
  const int64_t now_ms = impl_->clock_.NowMillis();
  std::optional<Reservation> found;
  absl::Status s = impl_->overlay_.Read([&](const storage::ReadView& view, uint64_t) {
    for (Table t : {Table::kHolds, Table::kReservations}) {
      auto r = ReadHistoryRecord<Reservation>(view.Get(t, id), "reservation", &ReservationExpired,
                                              now_ms, impl_->options_.history_retention_ms);
      if (!r.ok()) return r.status();
      if (r->has_value()) {
        found = std::move(**r);
        break;
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (!found) return absl::NotFoundError(fmt::format("reservation '{}' not found", id));
  return *std::move(found);
}

absl::StatusOr<Order> InventoryCore::GetOrder(std::string_view id) const {
  if (absl::Status s = ValidateId("order_id", id, impl_->options_.limits); !s.ok()) return s;
  auto o =
      ReadHistoryRecord<Order>(impl_->overlay_.Get(Table::kOrders, id), "order", &OrderExpired,
                               impl_->clock_.NowMillis(), impl_->options_.history_retention_ms);
  if (!o.ok()) return o.status();
  if (!o->has_value()) return absl::NotFoundError(fmt::format("order '{}' not found", id));
  return std::move(**o);
}

absl::StatusOr<std::unique_ptr<InventoryCore::StockSnapshot>> InventoryCore::OpenStockSnapshot(
    std::vector<inventory::v1::StockKey> filter) const {
  std::vector<TableOverlay::KeyRange> ranges;
  ranges.reserve(filter.size());
  for (const auto& k : filter) {
    ranges.push_back({LevelKey(k.sku(), k.location()), k.location().empty()});
  }
  uint64_t as_of = 0;
  auto view = impl_->overlay_.Snapshot(Table::kStock, ranges, &as_of);
  return std::unique_ptr<StockSnapshot>(
      new OverlayStockSnapshot(std::move(view), as_of, std::move(filter)));
}

ChangeFeed& InventoryCore::change_feed() { return impl_->feed_; }
const CoreOptions& InventoryCore::options() const { return impl_->options_; }

CoreStats InventoryCore::stats() const {
  const CommitPipeline& p = impl_->pipeline_;
  CoreStats s;
  s.batches = p.batches_written();
  s.commands = p.commands_completed();
  s.events = p.events_completed();
  s.held_reservations = impl_->writer_.open_holds();
  s.stock_levels = impl_->writer_.stock_levels();
  s.reservations_made = impl_->writer_.reservations_made();
  s.last_sequence = impl_->feed_.last_sequence();
  s.unpublished_events = p.unpublished_events();
  s.queue_depth = p.queue_depth();
  const TableOverlay::Size overlay = impl_->overlay_.size();
  s.overlay_records = overlay.records;
  s.overlay_bytes = overlay.bytes;
  s.checkpoints = impl_->checkpointer_.checkpoints();
  s.checkpoint_sequence = impl_->checkpointer_.checkpoint_sequence();
  return s;
}

absl::Status InventoryCore::health() const { return impl_->pipeline_.health(); }

}  // namespace feed::core

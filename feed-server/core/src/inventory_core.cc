// The single writer. See inventory_core.h for the contract.
//
// Why one writer: every mutation of stock goes through one thread, so there is no lock on
// the hot path, the outbox sequence is trivially gap-free, and many commands share one
// WriteBatch and one WAL sync (group commit). Reads never come here: they go to the store,
// which only ever holds committed state. Four threads carry a batch: the writer applies it,
// the committer writes and syncs it, the completer answers its callers, the publisher
// publishes its events to the change feed (the writer applies, writes and answers a batch
// that arrives while everything is idle).
#include "core/inventory_core.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <random>
#include <thread>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "core/history.h"
#include "core/level_key.h"
#include "core/strings.h"
#include "core/validation.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "internal/v1/records.pb.h"
#include "spdlog/spdlog.h"

namespace feed::core {

using events::v1::Event;
using inventory::v1::Reservation;
using inventory::v1::StockLevel;
using order::v1::Order;
using order::v1::OrderStatus;
using storage::Table;

std::string_view OrderStatusName(OrderStatus status) {
  switch (status) {
    case order::v1::ORDER_STATUS_CONFIRMED: return "CONFIRMED";
    case order::v1::ORDER_STATUS_PAID: return "PAID";
    case order::v1::ORDER_STATUS_PACKING: return "PACKING";
    case order::v1::ORDER_STATUS_DISPATCHED: return "DISPATCHED";
    case order::v1::ORDER_STATUS_DELIVERED: return "DELIVERED";
    case order::v1::ORDER_STATUS_CANCELLED: return "CANCELLED";
    case order::v1::ORDER_STATUS_EXPIRED: return "EXPIRED";
    default: return "UNSPECIFIED";
  }
}

bool IsTerminal(OrderStatus status) {
  return status == order::v1::ORDER_STATUS_DELIVERED ||
         status == order::v1::ORDER_STATUS_CANCELLED || status == order::v1::ORDER_STATUS_EXPIRED;
}

namespace {

constexpr std::string_view kStockChanged = "inventory.stock.changed";
constexpr std::string_view kOrderStatusChanged = "order.status.changed";
constexpr std::string_view kOrderReceipt = "order.receipt";

std::string_view ReservationStateName(inventory::v1::ReservationState s) {
  switch (s) {
    case inventory::v1::RESERVATION_STATE_HELD: return "HELD";
    case inventory::v1::RESERVATION_STATE_COMMITTED: return "COMMITTED";
    case inventory::v1::RESERVATION_STATE_RELEASED: return "RELEASED";
    case inventory::v1::RESERVATION_STATE_EXPIRED: return "EXPIRED";
    default: return "UNSPECIFIED";
  }
}

// Stable across processes and builds (unlike std::hash or absl::Hash): FNV-1a, 64 bits.
uint64_t Fnv1a(std::string_view a, std::string_view b) {
  uint64_t h = 1469598103934665603ULL;
  for (std::string_view part : {a, std::string_view("\0", 1), b}) {
    for (unsigned char c : part) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

// The request without its idempotency key, canonically serialized, hashed with the method.
template <class Req>
uint64_t Fingerprint(std::string_view method, Req& request) {
  std::string key = std::move(*request.mutable_idempotency_key());
  request.clear_idempotency_key();
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  request.set_idempotency_key(std::move(key));
  return Fnv1a(method, bytes);
}

struct Level {
  int64_t on_hand = 0;
  int64_t reserved = 0;
  uint64_t version = 0;
  bool allow_backorder = false;
  int64_t updated_at_ms = 0;
  uint64_t sequence = 0;
};

void FillLevel(std::string_view key, const Level& l, StockLevel* out) {
  auto [sku, location] = SplitLevelKey(key);
  out->set_sku(std::string(sku));
  out->set_location(std::string(location));
  out->set_on_hand(l.on_hand);
  out->set_reserved(l.reserved);
  out->set_available(l.on_hand - l.reserved);
  out->set_version(l.version);
  out->set_allow_backorder(l.allow_backorder);
  out->set_updated_at_ms(l.updated_at_ms);
  out->set_sequence(l.sequence);
}

// Lines naming the same level are summed; order of first appearance is kept.
struct AggregatedLine {
  std::string key;
  std::string sku;
  std::string location;
  int64_t quantity;
  int first_index;
};

template <class LineT>
void Aggregate(const google::protobuf::RepeatedPtrField<LineT>& lines,
               std::vector<AggregatedLine>* out) {
  for (int i = 0; i < lines.size(); ++i) {
    std::string key = LevelKey(lines[i].sku(), lines[i].location());
    bool merged = false;
    for (auto& a : *out) {
      if (a.key == key) {
        a.quantity += lines[i].quantity();
        merged = true;
        break;
      }
    }
    if (!merged) {
      // The index in the request, so that errors name the line the client sent.
      out->push_back({std::move(key), lines[i].sku(), lines[i].location(), lines[i].quantity(), i});
    }
  }
}

// An open hold as the writer keeps it. Plain fields rather than the stored Reservation
// message: a million of them are read at startup and every Reserve makes one, and a message
// costs an allocation per string and per line. Its id is the key of the map that holds it.
struct HoldLine {
  std::string level_key;  // LevelKey(sku, location)
  int64_t quantity = 0;
};

struct Hold {
  std::string order_id;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  bool owned_by_order = false;
  absl::InlinedVector<HoldLine, 1> lines;  // most holds have one line
};

// The map entry of an open hold: {reservation id, hold}.
using OpenHold = std::pair<const std::string, Hold>;

// `out` becomes the HELD reservation record of `hold` (what kHolds stores, what Reserve returns).
// Empty strings are left unset: setting one would allocate it.
void FillReservation(const OpenHold& hold, Reservation* out) {
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
    l->set_sku(std::string(sku));
    if (!location.empty()) l->set_location(std::string(location));
    l->set_quantity(line.quantity);
  }
}

// A stored reservation or order as callers see it: nothing when it is absent or past the
// history retention (core/history.h), DATA_LOSS when it does not parse.
template <class Record>
absl::StatusOr<std::optional<Record>> ReadHistoryRecord(
    const absl::StatusOr<std::optional<std::string>>& stored, std::string_view what,
    bool (*expired)(const Record&, int64_t now_ms, int64_t retention_ms), int64_t now_ms,
    int64_t retention_ms) {
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::optional<Record>();
  Record record;
  if (!record.ParseFromString(**stored)) {
    return absl::DataLossError(StrCat(what, " record is corrupt"));
  }
  if (expired(record, now_ms, retention_ms)) return std::optional<Record>();
  return record;
}

// The inverse, for recovery; false if `r` is not a HELD reservation.
bool ToHold(const Reservation& r, Hold* out) {
  if (r.state() != inventory::v1::RESERVATION_STATE_HELD) return false;
  out->order_id = r.order_id();
  out->created_at_ms = r.created_at_ms();
  out->expires_at_ms = r.expires_at_ms();
  out->owned_by_order = r.owned_by_order();
  out->lines.clear();
  out->lines.reserve(r.lines_size());
  for (const auto& l : r.lines()) out->lines.push_back({LevelKey(l.sku(), l.location()), l.quantity()});
  return true;
}

}  // namespace

// Everything a batch of commands writes; committed as one WriteBatch.
struct Command;

struct Batch {
  uint64_t id = 0;  // increasing; the committer publishes the last committed one
  std::vector<std::unique_ptr<Command>> commands;
  std::unique_ptr<storage::WriteGroup> group;
  // The batch's events live in one arena (one allocation for many events); each published
  // EventPtr shares ownership of it, so it is freed when the last reader drops its events.
  std::shared_ptr<google::protobuf::Arena> arena;
  size_t expected_events = 1;  // sizes the arena's first block
  std::vector<std::shared_ptr<Event>> events;
  absl::flat_hash_set<std::string> dirty_levels;
  // Overlays: what earlier commands of this batch wrote, not yet visible in the store.
  absl::flat_hash_map<std::string, Order> orders;
  absl::flat_hash_set<std::string> dirty_orders;
  absl::flat_hash_map<std::string, internal::v1::IdempotencyRecord> idempotency;
  absl::flat_hash_map<std::string, Reservation> closed;
  int64_t now_ms = 0;
  absl::Status commit_status;  // set by the committer before the batch goes to the completer
};

struct Command {
  virtual ~Command() = default;
  virtual void Execute(InventoryCore::Impl& impl, Batch& batch) = 0;
  virtual void Complete() = 0;
  virtual void Fail(absl::Status status) = 0;
};

class InventoryCore::Impl {
 public:
  Impl(storage::Store& store, const Clock& clock, const CoreOptions& options)
      : store_(store),
        clock_(clock),
        options_(options),
        feed_(options.change_feed_retention),
        eager_apply_commands_(std::max<size_t>(1, options.max_batch_commands / 8)) {}

  ~Impl() { Shutdown(); }

  absl::Status Recover();
  void Start() {
    // Named for top -H, perf and gdb.
    writer_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "feed-writer");
      WriterLoop();
    });
    committer_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "feed-committer");
      CommitterLoop();
    });
    completer_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "feed-completer");
      CompleterLoop();
    });
    publisher_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "feed-publisher");
      PublisherLoop();
    });
  }
  void Shutdown();
  void Enqueue(std::unique_ptr<Command> command);

  template <class Req, class Resp>
  using Handler = absl::Status (Impl::*)(Req&, Batch&, Resp&);

  template <class Req, class Resp>
  void Submit(std::string_view method, Req request, Done<Resp> done, CancelFn cancelled,
              absl::Status (*validate)(Req&, const CoreOptions&), Handler<Req, Resp> handler);

  template <class Req, class Resp>
  absl::StatusOr<Resp> RunIdempotent(std::string_view method, uint64_t fingerprint, Req& request,
                                     Batch& b, Handler<Req, Resp> handler);

  // Handlers: check everything first, then change state; an error leaves no trace.
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

  // Reads.
  absl::Status ReadLevels(const storage::ReadView& view,
                          const google::protobuf::RepeatedPtrField<inventory::v1::StockKey>& keys,
                          const std::function<void(StockLevel&&)>& fn,
                          const std::function<void(const inventory::v1::StockKey&)>& missing) const;

  storage::Store& store_;
  const Clock& clock_;
  const CoreOptions options_;
  ChangeFeed feed_;

  // Queue between callers and the writer.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Command>> queue_;
  bool stopping_ = false;
  absl::Status failed_;  // set once a commit fails: the in-memory state is then ahead of disk
  std::thread writer_;
  // While a commit is under way, the writer lets commands gather in queue_ and applies them
  // in one batch when the committer is free again, or at once when eager_apply_commands_
  // wait (heavy load, where applying and writing should overlap). Fewer, larger write rounds:
  // 1,533 WAL syncs instead of 2,514 in 5 s of unary Reserve, +4 to +9 % throughput
  // (bench/RESULTS.md, session 7). commit_idle_ is set under commit_mu_; the committer
  // wakes the writer after setting it (checking queue_ under mu_, so no wake-up is lost).
  std::atomic<bool> commit_idle_{true};
  const size_t eager_apply_commands_;
  bool WriterMayApply() const {  // with mu_ held
    return stopping_ ||
           (!queue_.empty() && (commit_idle_.load() || queue_.size() >= eager_apply_commands_));
  }

  // Between the writer and the committer: batches applied in memory, waiting for their
  // WriteBatch to be committed (at most kMaxUncommittedBatches, so memory and latency stay
  // bounded; the committer syncs all those waiting at once).
  static constexpr size_t kMaxUncommittedBatches = 16;
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;
  std::deque<std::shared_ptr<Batch>> commit_queue_;
  bool writer_done_ = false;
  std::atomic<uint64_t> committed_batch_{0};
  std::thread committer_;
  // Between the committer and the completer (also under commit_mu_): written batches whose
  // callers are yet to hear and whose events are yet to be published. Under load the
  // committer goes on with the next write and sync while these are answered.
  std::condition_variable completion_cv_;
  std::deque<std::shared_ptr<Batch>> completion_queue_;
  size_t completions_pending_ = 0;  // queued or being completed
  bool committer_done_ = false;
  std::thread completer_;
  // Between whoever completes batches and the publisher: events of answered commands, in
  // sequence order, waiting to be published to the change feed. Fan-out to thousands of
  // watchers took the completer ~0.9 s of every second with 10,000 watchers (hot SKUs,
  // bench/RESULTS.md), and every caller waited behind it; now callers are answered while
  // the publisher delivers. Bounded: a publisher that falls this far behind holds back
  // completions.
  static constexpr size_t kMaxUnpublishedEvents = 1 << 16;
  std::mutex publish_mu_;
  std::condition_variable publish_cv_;
  std::vector<EventPtr> unpublished_;
  bool completer_done_ = false;
  std::thread publisher_;

  std::atomic<uint64_t> stat_batches_{0}, stat_commands_{0}, stat_events_{0};
  std::atomic<size_t> stat_holds_{0}, stat_levels_{0};

  // Writer-owned state.
  absl::flat_hash_map<std::string, Level> levels_;
  // node_hash_map: references stay valid across inserts and erases of other holds, so the
  // expiry index (and recovery's sums) can view the ids and level keys inside the nodes.
  absl::node_hash_map<std::string, Hold> holds_;
  // {expires_at_ms, reservation id viewing the key in holds_}; an entry is erased before
  // its hold.
  absl::btree_set<std::pair<int64_t, std::string_view>> expiry_index_;
  uint64_t next_sequence_ = 1;
  uint64_t next_batch_id_ = 1;
  // Batches handed to the committer and not yet known to be committed, oldest first: their
  // overlays stay visible to lookups until the store has their writes.
  std::deque<std::shared_ptr<Batch>> uncommitted_;
  std::string store_id_;
  int64_t next_sweep_ms_ = 0;
  // Reused by the writer for every record it writes: WriteGroup::Put copies the bytes, and a
  // reused buffer and message keep their capacity, so steady state allocates nothing here.
  std::string record_buffer_;
  StockLevel level_buffer_;
  Reservation reservation_buffer_;

 private:
  void WriterLoop();
  void ApplyBatch(std::vector<std::unique_ptr<Command>>& commands, bool sweep);
  void CommitterLoop();
  void CompleterLoop();
  void PublisherLoop();
  absl::Status WriteBatches(std::vector<std::shared_ptr<Batch>>& batches);
  void CompleteBatches(const std::vector<std::shared_ptr<Batch>>& batches);
  void ForgetCommittedBatches();

  Event* NewEvent(Batch& b, std::string_view type, std::string key);
  // `message` serialized into record_buffer_ (after `prefix`), valid until the next call.
  std::string_view Serialized(const google::protobuf::MessageLite& message,
                              std::string_view prefix = {});
  void ChangeLevel(Batch& b, const std::string& key, Level& level, int64_t delta_on_hand,
                   int64_t delta_reserved, events::v1::StockChangeCause cause,
                   const std::string& reservation_id, const std::string& order_id,
                   const std::string& reason, StockLevel* out);
  absl::Status CheckAvailable(const std::vector<AggregatedLine>& lines, std::string_view field);
  absl::Status CheckCommittable(const OpenHold& hold);
  absl::Status CheckReservationIdFree(Batch& b, const std::string& id);
  // Places a new hold under `id`, which the caller has found free; an id in use fails
  // (INTERNAL) before anything changes.
  absl::StatusOr<OpenHold*> HoldLines(Batch& b, const std::vector<AggregatedLine>& lines,
                                      std::string id, const std::string& order_id, int64_t ttl_ms,
                                      bool owned_by_order,
                                      google::protobuf::RepeatedPtrField<StockLevel>* levels);
  absl::StatusOr<OpenHold*> FindOpenHold(Batch& b, const std::string& id);
  Reservation CloseHold(Batch& b, OpenHold& hold, inventory::v1::ReservationState state,
                        events::v1::StockChangeCause cause, const std::string& reason,
                        google::protobuf::RepeatedPtrField<StockLevel>* levels);
  absl::StatusOr<std::optional<Reservation>> FindClosed(Batch& b, const std::string& id);
  absl::StatusOr<Order*> LoadOrder(Batch& b, const std::string& id);
  void SetOrderStatus(Batch& b, Order& order, OrderStatus status, const std::string& details);
  absl::StatusOr<std::optional<internal::v1::IdempotencyRecord>> FindIdempotency(
      Batch& b, const std::string& key);
};

namespace {

template <class Req, class Resp>
struct RpcCommand final : Command {
  std::string_view method;
  InventoryCore::Impl::Handler<Req, Resp> handler;
  Req request;
  uint64_t fingerprint = 0;
  Done<Resp> done;
  CancelFn cancelled;
  absl::StatusOr<Resp> result = absl::InternalError("command not executed");

  void Execute(InventoryCore::Impl& impl, Batch& b) override {
    if (cancelled && cancelled()) {
      result = absl::CancelledError("the call was cancelled or its deadline passed before it ran");
      return;
    }
    result = impl.RunIdempotent<Req, Resp>(method, fingerprint, request, b, handler);
  }
  void Complete() override { std::move(done)(std::move(result)); }
  void Fail(absl::Status status) override { std::move(done)(std::move(status)); }
};

struct ExpireCommand final : Command {
  Done<ExpireResult> done;
  ExpireResult result;
  void Execute(InventoryCore::Impl& impl, Batch& b) override { impl.DoExpire(b, result); }
  void Complete() override { std::move(done)(result); }
  void Fail(absl::Status status) override { std::move(done)(std::move(status)); }
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Recovery and the writer loop.

absl::Status InventoryCore::Impl::Recover() {
  auto next = store_.Get(Table::kMeta, storage::meta_keys::kNextSequence);
  if (!next.ok()) return next.status();
  if (next->has_value()) {
    auto seq = storage::DecodeSequence(**next);
    if (!seq) return absl::DataLossError("meta next_sequence is corrupt");
    next_sequence_ = *seq;
  }
  auto id = store_.Get(Table::kMeta, storage::meta_keys::kStoreId);
  if (!id.ok()) return id.status();
  if (id->has_value()) {
    store_id_ = **id;
  } else {
    // A new store: a random id keeps event ids unique across stores that restart at 1.
    std::random_device rd;
    uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(v));
    store_id_ = hex;
    auto group = store_.NewWriteGroup();
    group->Put(Table::kMeta, storage::meta_keys::kStoreId, store_id_);
    if (auto s = store_.Commit(*group); !s.ok()) return s;
  }

  // The two tables are independent: read them on two threads (startup with a million levels
  // and a million holds is mostly protobuf parsing and hash-map inserts). Every index is
  // sized from the store's estimate first, so none is rehashed while it grows.
  const auto started = std::chrono::steady_clock::now();
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - t)
        .count();
  };
  int64_t stock_ms = 0, holds_ms = 0;
  absl::Status stock_error, holds_error;
  std::thread stock_reader([&] {
    levels_.reserve(store_.ApproximateCount(Table::kStock));
    absl::Status parse_error;
    stock_error = store_.Scan(Table::kStock, "", "", [&](std::string_view key, std::string_view value) {
      StockLevel p;
      if (!p.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
        parse_error = absl::DataLossError("stock level record is corrupt");
        return false;
      }
      levels_.emplace(std::string(key), Level{p.on_hand(), p.reserved(), p.version(),
                                              p.allow_backorder(), p.updated_at_ms(), p.sequence()});
      return true;
    });
    if (stock_error.ok()) stock_error = parse_error;
    stock_ms = ms_since(started);
  });
  // What the open holds reserve per level, keyed by views of the level keys inside holds_
  // (its nodes do not move), so summing a million lines allocates nothing per line.
  absl::flat_hash_map<std::string_view, int64_t> held;
  {
    const size_t estimate = store_.ApproximateCount(Table::kHolds);
    holds_.reserve(estimate);
    held.reserve(estimate);
    std::vector<std::pair<int64_t, std::string_view>> expiring;
    expiring.reserve(estimate);
    absl::Status parse_error;
    Reservation record;  // reused: parsing into it again allocates nothing new
    holds_error = store_.Scan(Table::kHolds, "", "", [&](std::string_view key, std::string_view value) {
      if (!record.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
        parse_error = absl::DataLossError(StrCat("hold record '", key, "' is corrupt"));
        return false;
      }
      auto& [id, hold] = *holds_.try_emplace(std::string(key)).first;
      if (record.reservation_id() != key || !ToHold(record, &hold)) {
        parse_error = absl::DataLossError(
            StrCat("hold record '", key, "' is not a HELD reservation with that id"));
        return false;
      }
      for (const auto& line : hold.lines) held[line.level_key] += line.quantity;
      expiring.emplace_back(hold.expires_at_ms, id);
      return true;
    });
    if (holds_error.ok()) holds_error = parse_error;
    // Sorted first, the expiry index is built by appending.
    std::sort(expiring.begin(), expiring.end());
    for (const auto& entry : expiring) expiry_index_.insert(expiry_index_.end(), entry);
    holds_ms = ms_since(started);
  }
  stock_reader.join();
  if (!stock_error.ok()) return stock_error;
  if (!holds_error.ok()) return holds_error;

  // The invariants of DESIGN section 3, checked on every start.
  size_t levels_with_holds = 0;
  for (const auto& [key, level] : levels_) {
    auto [sku, location] = SplitLevelKey(key);
    auto it = held.find(key);
    int64_t sum = 0;
    if (it != held.end()) {
      sum = it->second;
      ++levels_with_holds;
    }
    if (sum != level.reserved) {
      return absl::DataLossError(StrCat("invariant broken: sku '", sku, "' at '", location,
                                              "' has reserved ", level.reserved,
                                              " but its open holds sum to ", sum));
    }
    if (!level.allow_backorder && level.on_hand - level.reserved < 0) {
      return absl::DataLossError(StrCat("invariant broken: sku '", sku, "' at '", location,
                                              "' has negative available"));
    }
  }
  if (levels_with_holds != held.size()) {
    for (const auto& [level_key, sum] : held) {
      if (!levels_.contains(absl::string_view(level_key.data(), level_key.size()))) {
        auto [sku, location] = SplitLevelKey(level_key);
        return absl::DataLossError(StrCat("invariant broken: open holds reserve ", sum, " of sku '",
                                          sku, "' at '", location,
                                          "', a level that does not exist"));
      }
    }
  }
  feed_.Reset(next_sequence_ - 1);
  stat_holds_ = holds_.size();
  stat_levels_ = levels_.size();
  next_sweep_ms_ = clock_.NowMillis() + options_.sweep_interval_ms;
  spdlog::info("core: recovered {} stock levels, {} open holds, next sequence {}, store id {} "
               "in {} ms (stock read in {} ms, holds in {} ms, alongside)",
               levels_.size(), holds_.size(), next_sequence_, store_id_, ms_since(started), stock_ms,
               holds_ms);
  return absl::OkStatus();
}

void InventoryCore::Impl::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !writer_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable() && writer_.get_id() != std::this_thread::get_id()) writer_.join();
  {
    std::lock_guard lock(commit_mu_);
    writer_done_ = true;
  }
  commit_cv_.notify_all();
  if (committer_.joinable() && committer_.get_id() != std::this_thread::get_id()) {
    committer_.join();
  }
  {
    std::lock_guard lock(commit_mu_);
    committer_done_ = true;
  }
  completion_cv_.notify_all();
  if (completer_.joinable() && completer_.get_id() != std::this_thread::get_id()) {
    completer_.join();
  }
  {
    std::lock_guard lock(publish_mu_);
    completer_done_ = true;
  }
  publish_cv_.notify_all();
  if (publisher_.joinable() && publisher_.get_id() != std::this_thread::get_id()) {
    publisher_.join();
  }
}

void InventoryCore::Impl::Enqueue(std::unique_ptr<Command> command) {
  absl::Status reject;
  bool may_apply = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      reject = absl::UnavailableError("the server is shutting down");
    } else if (!failed_.ok()) {
      reject = failed_;
    } else if (queue_.size() >= options_.max_queue_depth) {
      reject = absl::ResourceExhaustedError(StrCat(
          "writer queue is full (", options_.max_queue_depth, " commands); retry with backoff"));
    } else {
      queue_.push_back(std::move(command));
      may_apply = WriterMayApply();
    }
  }
  if (!reject.ok()) {
    command->Fail(std::move(reject));
    return;
  }
  if (may_apply) cv_.notify_one();
}

void InventoryCore::Impl::WriterLoop() {
  std::vector<std::unique_ptr<Command>> commands;
  commands.reserve(options_.max_batch_commands);
  while (true) {
    bool stop = false;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] { return WriterMayApply(); };
      if (options_.sweep_interval_ms > 0) {
        int64_t wait_ms = std::max<int64_t>(0, next_sweep_ms_ - clock_.NowMillis());
        cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), ready);
      } else {
        cv_.wait(lock, ready);
      }
      while (!queue_.empty() && commands.size() < options_.max_batch_commands) {
        commands.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      stop = stopping_ && queue_.empty();
    }
    bool sweep = options_.sweep_interval_ms > 0 && clock_.NowMillis() >= next_sweep_ms_;
    if (!commands.empty() || sweep) ApplyBatch(commands, sweep);
    commands.clear();
    if (stop) break;
  }
}

// Stage 1, the writer thread: apply a batch to the in-memory state and build its
// WriteBatch, then hand it to the committer and go on with the next batch while this one
// is written and synced. Lookups of later batches still see this batch's overlays (see
// uncommitted_) until the committer reports it committed.
void InventoryCore::Impl::ApplyBatch(std::vector<std::unique_ptr<Command>>& commands,
                                     bool sweep) {
  {
    std::lock_guard lock(mu_);
    if (!failed_.ok()) {
      for (auto& c : commands) c->Fail(failed_);
      return;
    }
  }
  ForgetCommittedBatches();
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
    next_sweep_ms_ = b.now_ms + options_.sweep_interval_ms;
  }

  for (const auto& key : b.dirty_levels) {
    FillLevel(key, levels_[key], &level_buffer_);
    b.group->Put(Table::kStock, key, Serialized(level_buffer_));
  }
  for (const auto& id : b.dirty_orders) {
    b.group->Put(Table::kOrders, id, Serialized(b.orders[id]));
  }
  for (const auto& e : b.events) {
    b.group->Put(Table::kOutbox, storage::EncodeSequence(e->sequence()), Serialized(*e));
  }
  if (b.group->Count() > 0) {
    b.group->Put(Table::kMeta, storage::meta_keys::kNextSequence,
                 storage::EncodeSequence(next_sequence_));
  }
  b.commands = std::move(commands);
  stat_holds_.store(holds_.size(), std::memory_order_relaxed);
  stat_levels_.store(levels_.size(), std::memory_order_relaxed);

  uncommitted_.push_back(batch);
  // With nothing being committed or completed and no command waiting, this thread commits
  // and completes the batch itself: waking the committer would cost more than it overlaps
  // (a thread wake-up is tens of microseconds here). Under load, commands wait and batches
  // go to the committer while this thread applies the next ones.
  bool commands_waiting;
  {
    std::lock_guard lock(mu_);
    commands_waiting = !queue_.empty();
  }
  std::unique_lock lock(commit_mu_);
  if (!commands_waiting && commit_queue_.empty() && completions_pending_ == 0) {
    lock.unlock();
    std::vector<std::shared_ptr<Batch>> batches{std::move(batch)};
    batches.front()->commit_status = WriteBatches(batches);
    CompleteBatches(batches);
    ForgetCommittedBatches();
    return;
  }
  commit_cv_.wait(lock, [&] { return commit_queue_.size() < kMaxUncommittedBatches; });
  commit_queue_.push_back(std::move(batch));
  commit_idle_.store(false);
  lock.unlock();
  commit_cv_.notify_all();
}

void InventoryCore::Impl::ForgetCommittedBatches() {
  uint64_t committed = committed_batch_.load(std::memory_order_acquire);
  while (!uncommitted_.empty() && uncommitted_.front()->id <= committed) uncommitted_.pop_front();
}

// Stage 2, the committer thread: batches in order, one WriteBatch (and one WAL sync) each,
// then on to the completer while the next batches are written.
void InventoryCore::Impl::CommitterLoop() {
  std::vector<std::shared_ptr<Batch>> batches;
  while (true) {
    {
      std::unique_lock lock(commit_mu_);
      commit_cv_.wait(lock, [&] { return !commit_queue_.empty() || writer_done_; });
      if (commit_queue_.empty()) return;
      batches.assign(commit_queue_.begin(), commit_queue_.end());
    }
    absl::Status status = WriteBatches(batches);
    bool idle;
    {
      std::unique_lock lock(commit_mu_);
      // Bounded like the commit queue: a slow completer holds the committer back.
      commit_cv_.wait(lock, [&] { return completion_queue_.size() < kMaxUncommittedBatches; });
      commit_queue_.erase(commit_queue_.begin(),
                          commit_queue_.begin() + static_cast<std::ptrdiff_t>(batches.size()));
      for (auto& b : batches) {
        b->commit_status = status;
        completion_queue_.push_back(std::move(b));
      }
      completions_pending_ += batches.size();
      idle = commit_queue_.empty();
      if (idle) commit_idle_.store(true);
    }
    commit_cv_.notify_all();
    completion_cv_.notify_one();
    if (idle) {
      bool wake;
      {
        std::lock_guard lock(mu_);
        wake = WriterMayApply();
      }
      if (wake) cv_.notify_one();
    }
    batches.clear();
  }
}

// Stage 3, the completer thread: every written batch waiting, in commit order.
void InventoryCore::Impl::CompleterLoop() {
  std::vector<std::shared_ptr<Batch>> batches;
  while (true) {
    {
      std::unique_lock lock(commit_mu_);
      completion_cv_.wait(lock, [&] { return !completion_queue_.empty() || committer_done_; });
      if (completion_queue_.empty()) return;
      batches.assign(completion_queue_.begin(), completion_queue_.end());
      completion_queue_.clear();
    }
    commit_cv_.notify_all();  // room in the completion queue
    CompleteBatches(batches);
    {
      std::lock_guard lock(commit_mu_);
      completions_pending_ -= batches.size();
    }
    batches.clear();
  }
}

// Every batch waiting is written in order; only the last write syncs the WAL, which makes
// the earlier ones durable too: one fsync for all of them (group commit across batches).
// A failure is returned for all of them (and every later batch gets it too: failed_).
absl::Status InventoryCore::Impl::WriteBatches(std::vector<std::shared_ptr<Batch>>& batches) {
  absl::Status failed;
  {
    std::lock_guard lock(mu_);
    failed = failed_;
  }
  if (!failed.ok()) return failed;
  auto started = std::chrono::steady_clock::now();
  size_t last_write = batches.size();
  for (size_t i = 0; i < batches.size(); ++i) {
    if (batches[i]->group->Count() > 0) last_write = i;
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    Batch& b = *batches[i];
    if (b.group->Count() == 0) continue;
    absl::Status s = store_.Commit(*b.group, i == last_write ? storage::CommitMode::kConfigured
                                                             : storage::CommitMode::kNoSync);
    if (!s.ok()) {
      // The in-memory state is now ahead of the disk. Crash-only: refuse everything until
      // a restart recovers the committed state. No caller was told these succeeded.
      spdlog::critical("core: commit failed, refusing all further commands: {}", s.ToString());
      failed = absl::UnavailableError(
          StrCat("storage commit failed (", s.message(), "); the server must restart"));
      std::lock_guard lock(mu_);
      failed_ = failed;
      return failed;
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (options_.on_batch_committed) {
    size_t commands = 0, events = 0;
    for (const auto& b : batches) {
      commands += b->commands.size();
      events += b->events.size();
    }
    if (commands > 0 || events > 0) options_.on_batch_committed(commands, events, seconds);
  }
  committed_batch_.store(batches.back()->id, std::memory_order_release);
  stat_batches_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

// Answers the callers of written batches (or fails them with their commit's error), then
// hands the events of all of them to the publisher at once.
void InventoryCore::Impl::CompleteBatches(const std::vector<std::shared_ptr<Batch>>& batches) {
  std::vector<EventPtr> events;
  for (const auto& batch : batches) {
    Batch& b = *batch;
    if (!b.commit_status.ok()) {
      for (auto& c : b.commands) c->Fail(b.commit_status);
      continue;
    }
    stat_commands_.fetch_add(b.commands.size(), std::memory_order_relaxed);
    stat_events_.fetch_add(b.events.size(), std::memory_order_relaxed);
    for (auto& c : b.commands) c->Complete();
    events.insert(events.end(), b.events.begin(), b.events.end());
  }
  if (events.empty()) return;
  {
    std::unique_lock lock(publish_mu_);
    publish_cv_.wait(lock, [&] { return unpublished_.size() < kMaxUnpublishedEvents; });
    unpublished_.insert(unpublished_.end(), std::make_move_iterator(events.begin()),
                        std::make_move_iterator(events.end()));
  }
  publish_cv_.notify_all();
}

// Stage 4, the publisher thread: every event of answered commands, in sequence order, to
// the change feed (and so to the streams and the Kafka relay), all waiting ones in one
// publication.
void InventoryCore::Impl::PublisherLoop() {
  std::vector<EventPtr> events;
  while (true) {
    {
      std::unique_lock lock(publish_mu_);
      publish_cv_.wait(lock, [&] { return !unpublished_.empty() || completer_done_; });
      if (unpublished_.empty()) return;
      events.swap(unpublished_);
    }
    publish_cv_.notify_all();  // room for more
    feed_.Publish(events);
    events.clear();
  }
}

// ---------------------------------------------------------------------------------------
// Idempotency.

template <class Req, class Resp>
void InventoryCore::Impl::Submit(std::string_view method, Req request, Done<Resp> done,
                                 CancelFn cancelled, absl::Status (*validate)(Req&, const CoreOptions&),
                                 Handler<Req, Resp> handler) {
  if (absl::Status s = validate(request, options_); !s.ok()) {
    std::move(done)(std::move(s));
    return;
  }
  auto command = std::make_unique<RpcCommand<Req, Resp>>();
  command->method = method;
  command->handler = handler;
  // Hashing here keeps the work off the writer thread.
  if (!request.idempotency_key().empty()) command->fingerprint = Fingerprint(method, request);
  command->request = std::move(request);
  command->done = std::move(done);
  command->cancelled = std::move(cancelled);
  Enqueue(std::move(command));
}

absl::StatusOr<std::optional<internal::v1::IdempotencyRecord>>
InventoryCore::Impl::FindIdempotency(Batch& b, const std::string& key) {
  if (auto it = b.idempotency.find(key); it != b.idempotency.end()) return it->second;
  for (auto older = uncommitted_.rbegin(); older != uncommitted_.rend(); ++older) {
    if (auto it = (*older)->idempotency.find(key); it != (*older)->idempotency.end()) {
      return it->second;
    }
  }
  auto stored = store_.Get(Table::kIdempotency, key);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::optional<internal::v1::IdempotencyRecord>();
  int64_t created_at_ms = 0;
  std::string_view payload;
  internal::v1::IdempotencyRecord record;
  if (!storage::DecodeTimestamped(**stored, &created_at_ms, &payload) ||
      !record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(StrCat("idempotency record for key '", key, "' is corrupt"));
  }
  if (b.now_ms - created_at_ms > options_.idempotency_retention_ms) {
    return std::optional<internal::v1::IdempotencyRecord>();  // expired: the key is free again
  }
  return record;
}

template <class Req, class Resp>
absl::StatusOr<Resp> InventoryCore::Impl::RunIdempotent(std::string_view method,
                                                        uint64_t fingerprint, Req& request,
                                                        Batch& b, Handler<Req, Resp> handler) {
  const std::string& key = request.idempotency_key();
  if (!key.empty()) {
    auto found = FindIdempotency(b, key);
    if (!found.ok()) return found.status();
    if (found->has_value()) {
      const auto& record = **found;
      if (record.method() != method) {
        return absl::AlreadyExistsError(StrCat("idempotency_key '", key,
                                                     "' was already used with ", record.method(),
                                                     "; use a new key for ", method));
      }
      if (record.fingerprint() != fingerprint) {
        return absl::AlreadyExistsError(
            StrCat("idempotency_key '", key, "' was already used with a different ",
                         method, " request; use a new key for a new request"));
      }
      Resp replay;
      if (!replay.ParseFromString(record.response())) {
        return absl::DataLossError("stored response for idempotency_key is corrupt");
      }
      replay.set_replayed(true);
      return replay;
    }
  }
  Resp response;
  if (absl::Status s = (this->*handler)(request, b, response); !s.ok()) return s;
  if (!key.empty()) {
    internal::v1::IdempotencyRecord record;
    record.set_method(std::string(method));
    record.set_fingerprint(fingerprint);
    response.SerializeToString(record.mutable_response());
    record.set_created_at_ms(b.now_ms);
    b.group->Put(Table::kIdempotency, key,
                 Serialized(record, storage::EncodeTimestamped(b.now_ms, {})));
    b.idempotency[key] = std::move(record);
  }
  return response;
}

// ---------------------------------------------------------------------------------------
// Building blocks.

std::string_view InventoryCore::Impl::Serialized(const google::protobuf::MessageLite& message,
                                                 std::string_view prefix) {
  record_buffer_.assign(prefix);
  message.AppendToString(&record_buffer_);
  return record_buffer_;
}

Event* InventoryCore::Impl::NewEvent(Batch& b, std::string_view type, std::string key) {
  if (!b.arena) {
    // Sized to the batch: the change feed retains events (and so their arenas) for resume,
    // and a fixed 16 KB first block per one-command batch cost 300 MB at 2,000 updates/s
    // (seen in tests/reliability/slow_subscribers_test.cc).
    google::protobuf::ArenaOptions options;
    options.start_block_size = std::clamp<size_t>(b.expected_events * 400, 512, 64 << 10);
    options.max_block_size = 64 << 10;
    b.arena = std::make_shared<google::protobuf::Arena>(options);
  }
  std::shared_ptr<Event> e(b.arena, google::protobuf::Arena::CreateMessage<Event>(b.arena.get()));
  uint64_t seq = next_sequence_++;
  e->set_sequence(seq);
  e->set_event_id(StrCat(store_id_, "-", seq));
  e->set_type(std::string(type));
  e->mutable_occurred_at()->set_seconds(b.now_ms / 1000);
  e->mutable_occurred_at()->set_nanos(static_cast<int32_t>((b.now_ms % 1000) * 1'000'000));
  e->set_key(std::move(key));
  b.events.push_back(e);
  return e.get();
}

void InventoryCore::Impl::ChangeLevel(Batch& b, const std::string& key, Level& level,
                                      int64_t delta_on_hand, int64_t delta_reserved,
                                      events::v1::StockChangeCause cause,
                                      const std::string& reservation_id,
                                      const std::string& order_id, const std::string& reason,
                                      StockLevel* out) {
  auto [sku, location] = SplitLevelKey(key);
  Event* e = NewEvent(b, kStockChanged, std::string(sku));
  level.on_hand += delta_on_hand;
  level.reserved += delta_reserved;
  level.version += 1;
  level.updated_at_ms = b.now_ms;
  level.sequence = e->sequence();
  b.dirty_levels.insert(key);
  auto* change = e->mutable_stock_changed();
  FillLevel(key, level, change->mutable_level());
  change->set_delta_on_hand(delta_on_hand);
  change->set_delta_reserved(delta_reserved);
  change->set_cause(cause);
  change->set_reservation_id(reservation_id);
  change->set_order_id(order_id);
  change->set_reason(reason);
  if (out) *out = change->level();
}

absl::Status InventoryCore::Impl::CheckAvailable(const std::vector<AggregatedLine>& lines,
                                                 std::string_view field) {
  for (const auto& line : lines) {
    auto it = levels_.find(line.key);
    if (it == levels_.end()) {
      return absl::NotFoundError(StrCat(field, "[", line.first_index, "]: no stock for sku '",
                                              line.sku, "' at location '", line.location, "'"));
    }
    const Level& l = it->second;
    int64_t available = l.on_hand - l.reserved;
    if (!l.allow_backorder && available < line.quantity) {
      return absl::FailedPreconditionError(StrCat(
          "insufficient stock for sku '", line.sku, "' at location '", line.location,
          "': requested ", line.quantity, ", available ", std::max<int64_t>(available, 0)));
    }
  }
  return absl::OkStatus();
}

// Committing deducts the hold from on_hand, which never goes negative: a hold placed on
// backorder (beyond on_hand) can be committed once the stock has been received.
absl::Status InventoryCore::Impl::CheckCommittable(const OpenHold& hold) {
  for (const auto& line : hold.second.lines) {
    auto it = levels_.find(line.level_key);
    int64_t on_hand = it == levels_.end() ? 0 : it->second.on_hand;
    if (on_hand < line.quantity) {
      auto [sku, location] = SplitLevelKey(line.level_key);
      return absl::FailedPreconditionError(StrCat(
          "reservation '", hold.first, "' cannot be committed yet: sku '", sku,
          "' at location '", location, "' has on_hand ", on_hand, ", the hold needs ",
          line.quantity, " (backordered stock must be received first)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Reservation>> InventoryCore::Impl::FindClosed(Batch& b,
                                                                          const std::string& id) {
  if (auto it = b.closed.find(id); it != b.closed.end()) return it->second;
  for (auto older = uncommitted_.rbegin(); older != uncommitted_.rend(); ++older) {
    if (auto it = (*older)->closed.find(id); it != (*older)->closed.end()) return it->second;
  }
  // Past the history retention a closed reservation is gone: its id is free again.
  return ReadHistoryRecord<Reservation>(store_.Get(Table::kReservations, id), "reservation",
                                        &ReservationExpired, b.now_ms,
                                        options_.history_retention_ms);
}

absl::Status InventoryCore::Impl::CheckReservationIdFree(Batch& b, const std::string& id) {
  auto closed = FindClosed(b, id);
  if (!closed.ok()) return closed.status();
  if (holds_.contains(id) || closed->has_value()) {
    return absl::AlreadyExistsError(StrCat("reservation_id '", id, "' already exists"));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenHold*> InventoryCore::Impl::HoldLines(
    Batch& b, const std::vector<AggregatedLine>& lines, std::string id,
    const std::string& order_id, int64_t ttl_ms, bool owned_by_order,
    google::protobuf::RepeatedPtrField<StockLevel>* levels) {
  auto [it, inserted] = holds_.try_emplace(std::move(id));
  if (!inserted) {
    // Never expected (client ids are checked, generated ones carry a fresh sequence), but
    // adding to an open hold would corrupt it and the expiry index.
    return absl::InternalError(StrCat("reservation_id '", it->first, "' is already an open hold"));
  }
  OpenHold& hold = *it;
  Hold& h = hold.second;
  h.order_id = order_id;
  h.created_at_ms = b.now_ms;
  h.expires_at_ms = b.now_ms + (ttl_ms > 0 ? ttl_ms : options_.default_hold_ttl_ms);
  h.owned_by_order = owned_by_order;
  h.lines.reserve(lines.size());
  for (const auto& line : lines) {
    h.lines.push_back({line.key, line.quantity});
    ChangeLevel(b, line.key, levels_[line.key], 0, line.quantity,
                events::v1::STOCK_CHANGE_CAUSE_RESERVE, hold.first, order_id, "",
                levels ? levels->Add() : nullptr);
  }
  FillReservation(hold, &reservation_buffer_);
  b.group->Put(Table::kHolds, hold.first, Serialized(reservation_buffer_));
  expiry_index_.emplace(h.expires_at_ms, hold.first);
  return &hold;
}

absl::StatusOr<OpenHold*> InventoryCore::Impl::FindOpenHold(Batch& b, const std::string& id) {
  auto it = holds_.find(id);
  if (it == holds_.end()) {
    auto closed = FindClosed(b, id);
    if (!closed.ok()) return closed.status();
    if (closed->has_value()) {
      return absl::FailedPreconditionError(StrCat(
          "reservation '", id, "' is already ", ReservationStateName((*closed)->state())));
    }
    return absl::NotFoundError(StrCat("reservation '", id, "' not found"));
  }
  if (it->second.expires_at_ms <= b.now_ms) {
    return absl::FailedPreconditionError(
        StrCat("reservation '", id, "' expired at ", it->second.expires_at_ms, " ms"));
  }
  return &*it;
}

Reservation InventoryCore::Impl::CloseHold(Batch& b, OpenHold& hold,
                                           inventory::v1::ReservationState state,
                                           events::v1::StockChangeCause cause,
                                           const std::string& reason,
                                           google::protobuf::RepeatedPtrField<StockLevel>* levels) {
  bool commit = state == inventory::v1::RESERVATION_STATE_COMMITTED;
  for (const auto& line : hold.second.lines) {
    ChangeLevel(b, line.level_key, levels_[line.level_key], commit ? -line.quantity : 0,
                -line.quantity, cause, hold.first, hold.second.order_id, reason,
                levels ? levels->Add() : nullptr);
  }
  Reservation closed;
  FillReservation(hold, &closed);
  expiry_index_.erase({hold.second.expires_at_ms, hold.first});  // it views the key: first
  holds_.erase(closed.reservation_id());
  closed.set_state(state);
  closed.set_closed_at_ms(b.now_ms);
  closed.set_close_reason(reason);
  b.group->Delete(Table::kHolds, closed.reservation_id());
  b.group->Put(Table::kReservations, closed.reservation_id(), Serialized(closed));
  b.closed[closed.reservation_id()] = closed;
  return closed;
}

absl::StatusOr<Order*> InventoryCore::Impl::LoadOrder(Batch& b, const std::string& id) {
  if (auto it = b.orders.find(id); it != b.orders.end()) return &it->second;
  // An order changed by a batch still being committed: continue from that version.
  for (auto older = uncommitted_.rbegin(); older != uncommitted_.rend(); ++older) {
    if (auto it = (*older)->orders.find(id); it != (*older)->orders.end()) {
      return &(b.orders[id] = it->second);
    }
  }
  auto stored = ReadHistoryRecord<Order>(store_.Get(Table::kOrders, id), "order", &OrderExpired,
                                         b.now_ms, options_.history_retention_ms);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return absl::NotFoundError(StrCat("order '", id, "' not found"));
  return &(b.orders[id] = std::move(**stored));
}

void InventoryCore::Impl::SetOrderStatus(Batch& b, Order& order, OrderStatus status,
                                         const std::string& details) {
  OrderStatus previous = order.status();
  Event* e = NewEvent(b, kOrderStatusChanged, order.order_id());
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

// ---------------------------------------------------------------------------------------
// Handlers.

absl::Status InventoryCore::Impl::DoAdjust(inventory::v1::AdjustStockRequest& r, Batch& b,
                                           inventory::v1::AdjustStockResponse& out) {
  std::string key = LevelKey(r.sku(), r.location());
  auto it = levels_.find(key);
  Level current = it == levels_.end() ? Level{} : it->second;
  int64_t on_hand = r.mode() == inventory::v1::ADJUST_MODE_SET ? r.quantity()
                                                                 : current.on_hand + r.quantity();
  bool backorder = r.has_allow_backorder() ? r.allow_backorder() : current.allow_backorder;
  if (on_hand < 0) {
    return absl::FailedPreconditionError(StrCat(
        "adjustment would make on_hand of sku '", r.sku(), "' at location '", r.location(),
        "' negative: on_hand ", current.on_hand, ", change ", on_hand - current.on_hand));
  }
  if (!backorder && on_hand < current.reserved) {
    return absl::FailedPreconditionError(StrCat(
        "adjustment would leave sku '", r.sku(), "' at location '", r.location(),
        "' with negative available: on_hand ", on_hand, ", reserved ", current.reserved));
  }
  Level& level = levels_[key];
  level.allow_backorder = backorder;
  ChangeLevel(b, key, level, on_hand - current.on_hand, 0, events::v1::STOCK_CHANGE_CAUSE_ADJUST,
              "", "", r.reason(), out.mutable_level());
  out.set_sequence(level.sequence);
  return absl::OkStatus();
}

absl::Status InventoryCore::Impl::DoReserve(inventory::v1::ReserveRequest& r, Batch& b,
                                            inventory::v1::ReserveResponse& out) {
  std::vector<AggregatedLine> lines;
  Aggregate(r.lines(), &lines);
  for (const auto& line : lines) {
    if (line.quantity > options_.limits.max_quantity) {
      return absl::InvalidArgumentError(
          StrCat("lines: total quantity for sku '", line.sku, "' exceeds ",
                       options_.limits.max_quantity));
    }
  }
  if (auto s = CheckAvailable(lines, "lines"); !s.ok()) return s;
  std::string id = r.reservation_id();
  if (id.empty()) {
    // Unique by construction: client ids may not use the "rsv-" prefix (validation.cc).
    id = StrCat(kGeneratedReservationPrefix, store_id_.substr(0, 6), "-", next_sequence_);
  } else if (auto s = CheckReservationIdFree(b, id); !s.ok()) {
    return s;
  }
  auto hold = HoldLines(b, lines, std::move(id), r.order_id(), r.ttl_ms(), false,
                        out.mutable_levels());
  if (!hold.ok()) return hold.status();
  FillReservation(**hold, out.mutable_reservation());
  out.set_sequence(next_sequence_ - 1);
  return absl::OkStatus();
}

absl::Status InventoryCore::Impl::DoCommit(inventory::v1::CommitRequest& r, Batch& b,
                                           inventory::v1::CommitResponse& out) {
  auto hold = FindOpenHold(b, r.reservation_id());
  if (!hold.ok()) return hold.status();
  if ((*hold)->second.owned_by_order) {
    return absl::FailedPreconditionError(
        StrCat("reservation '", r.reservation_id(), "' belongs to order '",
                     (*hold)->second.order_id, "'; pay it with OrderService.PayOrder"));
  }
  if (auto s = CheckCommittable(**hold); !s.ok()) return s;
  *out.mutable_reservation() =
      CloseHold(b, **hold, inventory::v1::RESERVATION_STATE_COMMITTED,
                events::v1::STOCK_CHANGE_CAUSE_COMMIT, "", out.mutable_levels());
  out.set_sequence(next_sequence_ - 1);
  return absl::OkStatus();
}

absl::Status InventoryCore::Impl::DoRelease(inventory::v1::ReleaseRequest& r, Batch& b,
                                            inventory::v1::ReleaseResponse& out) {
  auto hold = FindOpenHold(b, r.reservation_id());
  if (!hold.ok()) return hold.status();
  if ((*hold)->second.owned_by_order) {
    return absl::FailedPreconditionError(
        StrCat("reservation '", r.reservation_id(), "' belongs to order '",
                     (*hold)->second.order_id, "'; cancel it with OrderService.CancelOrder"));
  }
  *out.mutable_reservation() =
      CloseHold(b, **hold, inventory::v1::RESERVATION_STATE_RELEASED,
                events::v1::STOCK_CHANGE_CAUSE_RELEASE, r.reason(), out.mutable_levels());
  out.set_sequence(next_sequence_ - 1);
  return absl::OkStatus();
}

absl::Status InventoryCore::Impl::DoCreateOrder(order::v1::CreateOrderRequest& r, Batch& b,
                                                order::v1::CreateOrderResponse& out) {
  google::protobuf::RepeatedPtrField<order::v1::OrderLine> all;
  for (const auto& item : r.item_ids()) {
    auto* l = all.Add();
    l->set_sku(item);
    l->set_location(options_.default_location);
    l->set_quantity(1);
  }
  for (const auto& line : r.lines()) *all.Add() = line;
  std::vector<AggregatedLine> lines;
  Aggregate(all, &lines);
  for (const auto& line : lines) {
    if (line.quantity > options_.limits.max_quantity) {
      return absl::InvalidArgumentError(
          StrCat("lines: total quantity for sku '", line.sku, "' exceeds ",
                       options_.limits.max_quantity));
    }
  }
  if (auto s = CheckAvailable(lines, r.item_ids().empty() ? "lines" : "items"); !s.ok()) return s;

  std::string suffix = StrCat(store_id_.substr(0, 6), "-", next_sequence_);
  std::string order_id = StrCat("ord-", suffix);
  auto placed = HoldLines(b, lines, StrCat(kGeneratedReservationPrefix, suffix), order_id,
                          r.hold_ttl_ms(), true, nullptr);
  if (!placed.ok()) return placed.status();
  const OpenHold& hold = **placed;
  Order& order = b.orders[order_id];
  order.set_order_id(order_id);
  order.set_customer_id(r.customer_id());
  for (const auto& line : lines) {
    auto* l = order.add_lines();
    l->set_sku(line.sku);
    l->set_location(line.location);
    l->set_quantity(line.quantity);
  }
  order.set_total_amount(r.total_amount());
  order.set_reservation_id(hold.first);
  order.set_created_at_ms(b.now_ms);
  order.set_hold_expires_at_ms(hold.second.expires_at_ms);
  SetOrderStatus(b, order, order::v1::ORDER_STATUS_CONFIRMED, "stock held");

  out.set_order_id(order_id);
  out.set_status(std::string(OrderStatusName(order::v1::ORDER_STATUS_CONFIRMED)));
  out.set_timestamp(b.now_ms / 1000);
  out.set_status_code(order::v1::ORDER_STATUS_CONFIRMED);
  out.set_reservation_id(hold.first);
  out.set_hold_expires_at_ms(hold.second.expires_at_ms);
  out.set_sequence(order.sequence());
  return absl::OkStatus();
}

absl::Status InventoryCore::Impl::DoPayOrder(order::v1::PayOrderRequest& r, Batch& b,
                                             order::v1::OrderResponse& out) {
  auto loaded = LoadOrder(b, r.order_id());
  if (!loaded.ok()) return loaded.status();
  Order& order = **loaded;
  if (order.status() != order::v1::ORDER_STATUS_CONFIRMED) {
    return absl::FailedPreconditionError(StrCat("order '", order.order_id(), "' is ",
                                                      OrderStatusName(order.status()),
                                                      "; only a CONFIRMED order can be paid"));
  }
  auto hold = FindOpenHold(b, order.reservation_id());
  if (!hold.ok()) return hold.status();
  if (auto s = CheckCommittable(**hold); !s.ok()) return s;
  CloseHold(b, **hold, inventory::v1::RESERVATION_STATE_COMMITTED,
            events::v1::STOCK_CHANGE_CAUSE_COMMIT, "order paid", nullptr);
  order.set_payment_reference(r.payment_reference());
  SetOrderStatus(b, order, order::v1::ORDER_STATUS_PAID, "payment received");
  Event* e = NewEvent(b, kOrderReceipt, order.order_id());
  auto* receipt = e->mutable_receipt();
  receipt->set_order_id(order.order_id());
  receipt->set_customer_id(order.customer_id());
  *receipt->mutable_lines() = order.lines();
  receipt->set_total_amount(order.total_amount());
  receipt->set_payment_reference(order.payment_reference());
  receipt->set_reservation_id(order.reservation_id());
  *out.mutable_order() = order;
  out.set_sequence(e->sequence());
  return absl::OkStatus();
}

absl::Status InventoryCore::Impl::DoAdvanceOrder(order::v1::AdvanceOrderRequest& r, Batch& b,
                                                 order::v1::OrderResponse& out) {
  auto loaded = LoadOrder(b, r.order_id());
  if (!loaded.ok()) return loaded.status();
  Order& order = **loaded;
  OrderStatus required = r.target() == order::v1::ORDER_STATUS_PACKING ? order::v1::ORDER_STATUS_PAID
                         : r.target() == order::v1::ORDER_STATUS_DISPATCHED
                             ? order::v1::ORDER_STATUS_PACKING
                             : order::v1::ORDER_STATUS_DISPATCHED;
  if (order.status() != required) {
    return absl::FailedPreconditionError(StrCat(
        "order '", order.order_id(), "' is ", OrderStatusName(order.status()),
        "; it can move to ", OrderStatusName(r.target()), " only from ",
        OrderStatusName(required)));
  }
  std::string details = r.details().empty()
                            ? StrCat("order progressed to ", OrderStatusName(r.target()))
                            : r.details();
  SetOrderStatus(b, order, r.target(), details);
  *out.mutable_order() = order;
  out.set_sequence(order.sequence());
  return absl::OkStatus();
}

absl::Status InventoryCore::Impl::DoCancelOrder(order::v1::CancelOrderRequest& r, Batch& b,
                                                order::v1::OrderResponse& out) {
  auto loaded = LoadOrder(b, r.order_id());
  if (!loaded.ok()) return loaded.status();
  Order& order = **loaded;
  std::string reason = r.reason().empty() ? "cancelled by request" : r.reason();
  switch (order.status()) {
    case order::v1::ORDER_STATUS_CONFIRMED: {
      auto it = holds_.find(order.reservation_id());
      if (it == holds_.end()) {
        return absl::InternalError(StrCat("order '", order.order_id(),
                                                "' is CONFIRMED but its hold is not open"));
      }
      CloseHold(b, *it, inventory::v1::RESERVATION_STATE_RELEASED,
                events::v1::STOCK_CHANGE_CAUSE_RELEASE, reason, nullptr);
      break;
    }
    case order::v1::ORDER_STATUS_PAID:
    case order::v1::ORDER_STATUS_PACKING:
      // The units left on_hand at payment; they come back.
      for (const auto& line : order.lines()) {
        std::string key = LevelKey(line.sku(), line.location());
        ChangeLevel(b, key, levels_[key], line.quantity(), 0,
                    events::v1::STOCK_CHANGE_CAUSE_RESTOCK, order.reservation_id(),
                    order.order_id(), reason, nullptr);
      }
      break;
    default:
      return absl::FailedPreconditionError(StrCat(
          "order '", order.order_id(), "' is ", OrderStatusName(order.status()),
          "; only CONFIRMED, PAID or PACKING orders can be cancelled"));
  }
  SetOrderStatus(b, order, order::v1::ORDER_STATUS_CANCELLED, reason);
  *out.mutable_order() = order;
  out.set_sequence(order.sequence());
  return absl::OkStatus();
}

void InventoryCore::Impl::DoExpire(Batch& b, ExpireResult& out) {
  std::vector<std::string> due;
  for (auto it = expiry_index_.begin();
       it != expiry_index_.end() && it->first <= b.now_ms && due.size() < options_.max_expiries_per_sweep;
       ++it) {
    due.emplace_back(it->second);
  }
  for (const auto& id : due) {
    auto it = holds_.find(id);
    if (it == holds_.end()) continue;
    Reservation closed = CloseHold(b, *it, inventory::v1::RESERVATION_STATE_EXPIRED,
                                   events::v1::STOCK_CHANGE_CAUSE_EXPIRE, "hold expired", nullptr);
    ++out.expired_holds;
    if (!closed.owned_by_order()) continue;
    auto order = LoadOrder(b, closed.order_id());
    if (!order.ok()) {
      spdlog::error("core: expired hold '{}' names order '{}': {}", id, closed.order_id(),
                    order.status().ToString());
      continue;
    }
    if ((*order)->status() == order::v1::ORDER_STATUS_CONFIRMED) {
      SetOrderStatus(b, **order, order::v1::ORDER_STATUS_EXPIRED,
                     "stock hold expired before payment");
      ++out.expired_orders;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Reads.

absl::Status InventoryCore::Impl::ReadLevels(
    const storage::ReadView& view,
    const google::protobuf::RepeatedPtrField<inventory::v1::StockKey>& keys,
    const std::function<void(StockLevel&&)>& fn,
    const std::function<void(const inventory::v1::StockKey&)>& missing) const {
  absl::Status parse_error;
  auto emit = [&](std::string_view, std::string_view value) {
    StockLevel level;
    if (!level.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      parse_error = absl::DataLossError("stock level record is corrupt");
      return false;
    }
    fn(std::move(level));
    return true;
  };
  if (keys.empty()) {
    if (auto s = view.Scan(Table::kStock, "", "", emit); !s.ok()) return s;
    return parse_error;
  }
  for (const auto& key : keys) {
    bool found = false;
    auto counting = [&](std::string_view k, std::string_view v) {
      found = true;
      return emit(k, v);
    };
    if (key.location().empty()) {
      if (auto s = view.Scan(Table::kStock, "", LevelKey(key.sku(), ""), counting); !s.ok()) {
        return s;
      }
    } else {
      auto value = view.Get(Table::kStock, LevelKey(key.sku(), key.location()));
      if (!value.ok()) return value.status();
      if (value->has_value()) counting("", **value);
    }
    if (!parse_error.ok()) return parse_error;
    if (!found && missing) missing(key);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// The public face.

InventoryCore::InventoryCore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InventoryCore::~InventoryCore() = default;

absl::StatusOr<std::unique_ptr<InventoryCore>> InventoryCore::Open(storage::Store& store,
                                                                   const Clock& clock,
                                                                   const CoreOptions& options) {
  if (options.max_batch_commands == 0) {
    return absl::InvalidArgumentError("max_batch_commands must be at least 1");
  }
  auto impl = std::make_unique<Impl>(store, clock, options);
  absl::Status recovered = impl->Recover();
  // Compaction was held back (if the store defers it) while recovery read every table.
  store.StartCompactions();
  if (!recovered.ok()) return recovered;
  impl->Start();
  return std::unique_ptr<InventoryCore>(new InventoryCore(std::move(impl)));
}

void InventoryCore::Shutdown() { impl_->Shutdown(); }

void InventoryCore::AdjustStock(inventory::v1::AdjustStockRequest request,
                                Done<inventory::v1::AdjustStockResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("inventory.v1.AdjustStock", std::move(request), std::move(done), std::move(cancelled), &ValidateAdjust,
                &Impl::DoAdjust);
}

void InventoryCore::Reserve(inventory::v1::ReserveRequest request,
                            Done<inventory::v1::ReserveResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("inventory.v1.Reserve", std::move(request), std::move(done), std::move(cancelled), &ValidateReserve,
                &Impl::DoReserve);
}

namespace {
// Adapts the const-ref validators to Submit's signature.
template <class Req, absl::Status (*F)(const Req&, const CoreOptions&)>
absl::Status ByRef(Req& r, const CoreOptions& o) {
  return F(r, o);
}
}  // namespace

void InventoryCore::Commit(inventory::v1::CommitRequest request,
                           Done<inventory::v1::CommitResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("inventory.v1.Commit", std::move(request), std::move(done), std::move(cancelled),
                &ByRef<inventory::v1::CommitRequest, ValidateCommit>, &Impl::DoCommit);
}

void InventoryCore::Release(inventory::v1::ReleaseRequest request,
                            Done<inventory::v1::ReleaseResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("inventory.v1.Release", std::move(request), std::move(done), std::move(cancelled),
                &ByRef<inventory::v1::ReleaseRequest, ValidateRelease>, &Impl::DoRelease);
}

void InventoryCore::CreateOrder(order::v1::CreateOrderRequest request,
                                Done<order::v1::CreateOrderResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("order.v1.CreateOrder", std::move(request), std::move(done), std::move(cancelled), &ValidateCreateOrder,
                &Impl::DoCreateOrder);
}

void InventoryCore::PayOrder(order::v1::PayOrderRequest request,
                             Done<order::v1::OrderResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("order.v1.PayOrder", std::move(request), std::move(done), std::move(cancelled),
                &ByRef<order::v1::PayOrderRequest, ValidatePayOrder>, &Impl::DoPayOrder);
}

void InventoryCore::AdvanceOrder(order::v1::AdvanceOrderRequest request,
                                 Done<order::v1::OrderResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("order.v1.AdvanceOrder", std::move(request), std::move(done), std::move(cancelled),
                &ByRef<order::v1::AdvanceOrderRequest, ValidateAdvanceOrder>,
                &Impl::DoAdvanceOrder);
}

void InventoryCore::CancelOrder(order::v1::CancelOrderRequest request,
                                Done<order::v1::OrderResponse> done,
                   CancelFn cancelled) {
  impl_->Submit("order.v1.CancelOrder", std::move(request), std::move(done), std::move(cancelled),
                &ByRef<order::v1::CancelOrderRequest, ValidateCancelOrder>, &Impl::DoCancelOrder);
}

void InventoryCore::ExpireDue(Done<ExpireResult> done) {
  auto command = std::make_unique<ExpireCommand>();
  command->done = std::move(done);
  impl_->Enqueue(std::move(command));
}

absl::StatusOr<inventory::v1::GetStockResponse> InventoryCore::GetStock(
    const inventory::v1::GetStockRequest& request) const {
  if (absl::Status s = ValidateGetStock(request, impl_->options_); !s.ok()) return s;
  inventory::v1::GetStockResponse response;
  auto view = impl_->store_.Snapshot();
  absl::Status s = impl_->ReadLevels(
      *view, request.keys(), [&](StockLevel&& l) { *response.add_levels() = std::move(l); },
      [&](const inventory::v1::StockKey& k) { *response.add_missing() = k; });
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<Reservation> InventoryCore::GetReservation(std::string_view id) const {
  if (absl::Status s = ValidateId("reservation_id", id, impl_->options_.limits); !s.ok()) return s;
  auto view = impl_->store_.Snapshot();
  const int64_t now_ms = impl_->clock_.NowMillis();
  for (Table t : {Table::kHolds, Table::kReservations}) {
    auto r = ReadHistoryRecord<Reservation>(view->Get(t, id), "reservation", &ReservationExpired,
                                            now_ms, impl_->options_.history_retention_ms);
    if (!r.ok()) return r.status();
    if (r->has_value()) return std::move(**r);
  }
  return absl::NotFoundError(StrCat("reservation '", id, "' not found"));
}

absl::StatusOr<Order> InventoryCore::GetOrder(std::string_view id) const {
  if (absl::Status s = ValidateId("order_id", id, impl_->options_.limits); !s.ok()) return s;
  auto o = ReadHistoryRecord<Order>(impl_->store_.Get(Table::kOrders, id), "order", &OrderExpired,
                                    impl_->clock_.NowMillis(),
                                    impl_->options_.history_retention_ms);
  if (!o.ok()) return o.status();
  if (!o->has_value()) return absl::NotFoundError(StrCat("order '", id, "' not found"));
  return std::move(**o);
}

namespace {

class StoreStockSnapshot : public InventoryCore::StockSnapshot {
 public:
  StoreStockSnapshot(std::unique_ptr<storage::ReadView> view, uint64_t as_of,
                     std::vector<inventory::v1::StockKey> filter)
      : view_(std::move(view)), as_of_(as_of), filter_(std::move(filter)) {}

  uint64_t as_of_sequence() const override { return as_of_; }

  absl::StatusOr<bool> Next(size_t max, std::vector<StockLevel>* out) override {
    size_t added = 0;
    absl::Status parse_error;
    // Resumes each prefix scan after the last key returned.
    auto take = [&](std::string_view key, std::string_view value) {
      if (key == resume_after_) return true;
      StockLevel level;
      if (!level.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
        parse_error = absl::DataLossError("stock level record is corrupt");
        return false;
      }
      out->push_back(std::move(level));
      resume_after_ = std::string(key);
      return ++added < max;
    };
    if (filter_.empty()) {
      if (done_) return false;
      if (auto s = view_->Scan(Table::kStock, resume_after_, "", take); !s.ok()) return s;
      if (!parse_error.ok()) return parse_error;
      done_ = added < max;
      return !done_;
    }
    while (next_key_ < filter_.size() && added < max) {
      const auto& key = filter_[next_key_];
      if (key.location().empty()) {
        std::string prefix = LevelKey(key.sku(), "");
        std::string start = resume_after_.empty() ? prefix : resume_after_;
        size_t before = added;
        if (auto s = view_->Scan(Table::kStock, start, prefix, take); !s.ok()) return s;
        if (!parse_error.ok()) return parse_error;
        if (added - before > 0 && added == max) return true;  // more of this prefix may follow
      } else {
        auto value = view_->Get(Table::kStock, LevelKey(key.sku(), key.location()));
        if (!value.ok()) return value.status();
        if (value->has_value()) {
          StockLevel level;
          if (!level.ParseFromString(**value)) return absl::DataLossError("stock level corrupt");
          out->push_back(std::move(level));
          ++added;
        }
      }
      ++next_key_;
      resume_after_.clear();
    }
    return next_key_ < filter_.size();
  }

 private:
  std::unique_ptr<storage::ReadView> view_;
  uint64_t as_of_;
  std::vector<inventory::v1::StockKey> filter_;
  size_t next_key_ = 0;
  std::string resume_after_;
  bool done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<InventoryCore::StockSnapshot>> InventoryCore::OpenStockSnapshot(
    std::vector<inventory::v1::StockKey> filter) const {
  auto view = impl_->store_.Snapshot();
  auto next = view->Get(Table::kMeta, storage::meta_keys::kNextSequence);
  if (!next.ok()) return next.status();
  uint64_t as_of = 0;
  if (next->has_value()) {
    auto seq = storage::DecodeSequence(**next);
    if (!seq) return absl::DataLossError("meta next_sequence is corrupt");
    as_of = *seq - 1;
  }
  return std::unique_ptr<StockSnapshot>(
      new StoreStockSnapshot(std::move(view), as_of, std::move(filter)));
}

ChangeFeed& InventoryCore::change_feed() { return impl_->feed_; }
const CoreOptions& InventoryCore::options() const { return impl_->options_; }

CoreStats InventoryCore::stats() const {
  CoreStats s;
  s.batches = impl_->stat_batches_.load();
  s.commands = impl_->stat_commands_.load();
  s.events = impl_->stat_events_.load();
  s.held_reservations = impl_->stat_holds_.load();
  s.stock_levels = impl_->stat_levels_.load();
  s.last_sequence = impl_->feed_.last_sequence();
  {
    std::lock_guard lock(impl_->publish_mu_);
    s.unpublished_events = impl_->unpublished_.size();
  }
  std::lock_guard lock(impl_->mu_);
  s.queue_depth = impl_->queue_.size();
  return s;
}

absl::Status InventoryCore::health() const {
  std::lock_guard lock(impl_->mu_);
  if (impl_->stopping_) return absl::UnavailableError("the server is shutting down");
  return impl_->failed_;
}

}  // namespace feed::core

// Unit tests of the core (single writer, idempotency, validation, orders, events, recovery)
// against storage::MemoryStore and a FakeClock. The automatic sweep is disabled
// (sweep_interval_ms = 0): expiry happens only when a test calls ExpireDue.
//
// Every test ends with a check of the store's invariants (TearDown): gap-free outbox from 1,
// event ids "<store id>-<seq>", meta next_sequence = last + 1, reserved == sum of open holds,
// available >= 0 unless backorder, and every stored level equal to the level carried by the
// event that produced it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/change_feed.h"
#include "core/clock.h"
#include "core/history.h"
#include "core/inventory_core.h"
#include "core/options.h"
#include "fmt/format.h"
#include "events/v1/events.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "internal/v1/records.pb.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "storage/memory_store.h"
#include "storage/store.h"

namespace feed {
namespace {

namespace inv = ::inventory::v1;
namespace ord = ::order::v1;
namespace ev = ::events::v1;
using core::CallSync;
using core::ChangeFeed;
using core::ChangeListener;
using core::EventPtr;
using core::ExpireResult;
using core::InventoryCore;
using storage::Table;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kStart = 1'700'000'000'000;
constexpr int64_t kDefaultTtl = 15 * 60 * 1000;

std::string Msg(const absl::Status& s) { return std::string(s.message().data(), s.message().size()); }

AssertionResult IsError(const absl::Status& s, absl::StatusCode code, std::string_view needle) {
  if (s.code() == code && Msg(s).find(needle) != std::string::npos) return AssertionSuccess();
  return AssertionFailure() << "got " << s << "; want " << absl::StatusCodeToString(code)
                            << " with a message containing '" << needle << "'";
}
template <class T>
AssertionResult IsError(const absl::StatusOr<T>& r, absl::StatusCode code,
                        std::string_view needle) {
  if (r.ok()) return AssertionFailure() << "got OK; want " << absl::StatusCodeToString(code);
  return IsError(r.status(), code, needle);
}

AssertionResult ProtoEq(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  if (google::protobuf::util::MessageDifferencer::Equals(a, b)) return AssertionSuccess();
  return AssertionFailure() << "\n" << a.DebugString() << "differs from\n" << b.DebugString();
}

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    const auto& _r = (expr);                             \
    ASSERT_TRUE(_r.ok()) << #expr << ": " << StatusOf(_r); \
  } while (0)

[[maybe_unused]] const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <class T>
const absl::Status& StatusOf(const absl::StatusOr<T>& r) {
  return r.status();
}

struct L {
  std::string sku;
  int64_t quantity;
  std::string location = "";
};

// Records everything the change feed delivers.
class Recorder : public ChangeListener {
 public:
  void OnEvents(const std::vector<EventPtr>& events) override {
    std::lock_guard lock(mu_);
    events_.insert(events_.end(), events.begin(), events.end());
    cv_.notify_all();
  }
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return events_.size() >= n; });
  }
  std::vector<EventPtr> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EventPtr> events_;
};

// Collects the results of many asynchronous calls.
template <class Resp>
class Collector {
 public:
  explicit Collector(size_t expected) : expected_(expected) {}
  core::Done<Resp> Callback() {
    return [this](absl::StatusOr<Resp> r) {
      std::lock_guard lock(mu_);
      results_.push_back(std::move(r));
      cv_.notify_all();
    };
  }
  std::vector<absl::StatusOr<Resp>> Wait() {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(20),
                             [&] { return results_.size() >= expected_; }));
    return results_;
  }

 private:
  size_t expected_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<absl::StatusOr<Resp>> results_;
};

class CoreTest : public ::testing::Test {
 protected:
  CoreTest() : clock_(kStart) { options_.sweep_interval_ms = 0; }

  void SetUp() override { OpenCore(); }

  void TearDown() override {
    if (core_) core_->Shutdown();
    core_.reset();
    if (check_invariants_) CheckStoreInvariants();
  }

  void OpenCore() {
    auto c = InventoryCore::Open(store_, clock_, options_);
    ASSERT_TRUE(c.ok()) << c.status();
    core_ = std::move(*c);
  }
  void Reopen() {
    core_.reset();
    OpenCore();
  }

  // --- Calls -----------------------------------------------------------------------------

  absl::StatusOr<inv::AdjustStockResponse> Adjust(const std::string& sku, int64_t quantity,
                                                  inv::AdjustMode mode = inv::ADJUST_MODE_DELTA,
                                                  const std::string& key = "",
                                                  const std::string& location = "") {
    inv::AdjustStockRequest r;
    r.set_sku(sku);
    r.set_location(location);
    r.set_mode(mode);
    r.set_quantity(quantity);
    r.set_reason("test");
    r.set_idempotency_key(key);
    return CallSync(*core_, &InventoryCore::AdjustStock, r);
  }
  absl::StatusOr<inv::AdjustStockResponse> Adjust(inv::AdjustStockRequest r) {
    return CallSync(*core_, &InventoryCore::AdjustStock, std::move(r));
  }

  static inv::ReserveRequest ReserveReq(const std::vector<L>& lines, const std::string& id = "",
                                        const std::string& key = "", int64_t ttl_ms = 0) {
    inv::ReserveRequest r;
    for (const auto& l : lines) {
      auto* line = r.add_lines();
      line->set_sku(l.sku);
      line->set_location(l.location);
      line->set_quantity(l.quantity);
    }
    r.set_reservation_id(id);
    r.set_idempotency_key(key);
    r.set_ttl_ms(ttl_ms);
    return r;
  }
  absl::StatusOr<inv::ReserveResponse> Reserve(const std::vector<L>& lines,
                                               const std::string& id = "",
                                               const std::string& key = "", int64_t ttl_ms = 0) {
    return CallSync(*core_, &InventoryCore::Reserve, ReserveReq(lines, id, key, ttl_ms));
  }
  // Writes one record straight into the store (for recovery tests: state the core never
  // writes itself).
  void StoreRecord(Table table, std::string_view key, const std::string& value) {
    auto group = store_.NewWriteGroup();
    group->Put(table, key, value);
    ASSERT_OK(store_.Commit(*group, storage::CommitMode::kConfigured));
  }
  absl::StatusOr<inv::ReserveResponse> Reserve(inv::ReserveRequest r) {
    return CallSync(*core_, &InventoryCore::Reserve, std::move(r));
  }
  absl::StatusOr<inv::CommitResponse> Commit(const std::string& id, const std::string& key = "") {
    inv::CommitRequest r;
    r.set_reservation_id(id);
    r.set_idempotency_key(key);
    return CallSync(*core_, &InventoryCore::Commit, r);
  }
  absl::StatusOr<inv::ReleaseResponse> Release(const std::string& id,
                                               const std::string& reason = "",
                                               const std::string& key = "") {
    inv::ReleaseRequest r;
    r.set_reservation_id(id);
    r.set_reason(reason);
    r.set_idempotency_key(key);
    return CallSync(*core_, &InventoryCore::Release, r);
  }
  absl::StatusOr<ord::CreateOrderResponse> CreateOrder(const std::vector<std::string>& items,
                                                       const std::vector<L>& lines = {},
                                                       const std::string& key = "",
                                                       int64_t hold_ttl_ms = 0,
                                                       double total = 10.0) {
    ord::CreateOrderRequest r;
    r.set_customer_id("cust-1");
    for (const auto& i : items) r.add_item_ids(i);
    for (const auto& l : lines) {
      auto* line = r.add_lines();
      line->set_sku(l.sku);
      line->set_location(l.location);
      line->set_quantity(l.quantity);
    }
    r.set_total_amount(total);
    r.set_idempotency_key(key);
    r.set_hold_ttl_ms(hold_ttl_ms);
    return CallSync(*core_, &InventoryCore::CreateOrder, r);
  }
  absl::StatusOr<ord::CreateOrderResponse> CreateOrder(ord::CreateOrderRequest r) {
    return CallSync(*core_, &InventoryCore::CreateOrder, std::move(r));
  }
  absl::StatusOr<ord::OrderResponse> Pay(const std::string& order_id,
                                         const std::string& reference = "pay-ref",
                                         const std::string& key = "") {
    ord::PayOrderRequest r;
    r.set_order_id(order_id);
    r.set_payment_reference(reference);
    r.set_idempotency_key(key);
    return CallSync(*core_, &InventoryCore::PayOrder, r);
  }
  absl::StatusOr<ord::OrderResponse> Advance(const std::string& order_id, ord::OrderStatus target,
                                             const std::string& details = "",
                                             const std::string& key = "") {
    ord::AdvanceOrderRequest r;
    r.set_order_id(order_id);
    r.set_target(target);
    r.set_details(details);
    r.set_idempotency_key(key);
    return CallSync(*core_, &InventoryCore::AdvanceOrder, r);
  }
  absl::StatusOr<ord::OrderResponse> Cancel(const std::string& order_id,
                                            const std::string& reason = "",
                                            const std::string& key = "") {
    ord::CancelOrderRequest r;
    r.set_order_id(order_id);
    r.set_reason(reason);
    r.set_idempotency_key(key);
    return CallSync(*core_, &InventoryCore::CancelOrder, r);
  }
  absl::StatusOr<ExpireResult> ExpireDue() {
    std::promise<absl::StatusOr<ExpireResult>> p;
    auto f = p.get_future();
    core_->ExpireDue([&p](absl::StatusOr<ExpireResult> r) { p.set_value(std::move(r)); });
    return f.get();
  }

  // --- Reads -----------------------------------------------------------------------------

  // The committed level, or a default one (with a test failure) when it does not exist.
  inv::StockLevel Level(const std::string& sku, const std::string& location = "default") {
    inv::GetStockRequest r;
    auto* k = r.add_keys();
    k->set_sku(sku);
    k->set_location(location);
    auto resp = core_->GetStock(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    if (!resp.ok() || resp->levels_size() != 1) {
      ADD_FAILURE() << "no level for " << sku << "/" << location;
      return {};
    }
    return resp->levels(0);
  }
  bool HasLevel(const std::string& sku, const std::string& location = "default") {
    inv::GetStockRequest r;
    auto* k = r.add_keys();
    k->set_sku(sku);
    k->set_location(location);
    auto resp = core_->GetStock(r);
    return resp.ok() && resp->levels_size() == 1;
  }

  std::vector<ev::Event> Outbox() {
    std::vector<ev::Event> out;
    auto s = store_.Scan(Table::kOutbox, "", "", [&](std::string_view k, std::string_view v) {
      ev::Event e;
      EXPECT_TRUE(e.ParseFromArray(v.data(), static_cast<int>(v.size())));
      EXPECT_EQ(k, storage::EncodeSequence(e.sequence()));
      out.push_back(std::move(e));
      return true;
    });
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  size_t EventCount() { return store_.Size(Table::kOutbox); }
  // Events with index >= from (sequence > from).
  std::vector<ev::Event> EventsAfter(size_t from) {
    auto all = Outbox();
    return std::vector<ev::Event>(all.begin() + static_cast<std::ptrdiff_t>(from), all.end());
  }
  std::string StoreId() {
    auto id = store_.Get(Table::kMeta, storage::meta_keys::kStoreId);
    EXPECT_TRUE(id.ok() && id->has_value());
    return id.ok() && id->has_value() ? **id : "";
  }
  // Polls `done` every millisecond for up to 10 s; whether it came true.
  static bool Eventually(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  // Publication to the change feed follows `done`: wait for it.
  void WaitPublished(uint64_t sequence) {
    Eventually([&] { return core_->change_feed().last_sequence() >= sequence; });
    ASSERT_EQ(core_->change_feed().last_sequence(), sequence);
  }

  void CheckStoreInvariants() {
    SCOPED_TRACE("store invariants");
    auto events = Outbox();
    std::string store_id;
    if (!events.empty()) store_id = StoreId();
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_EQ(events[i].sequence(), i + 1) << "outbox has a gap";
      EXPECT_EQ(events[i].event_id(), fmt::format("{}-{}", store_id, i + 1));
    }
    auto next = store_.Get(Table::kMeta, storage::meta_keys::kNextSequence);
    ASSERT_TRUE(next.ok());
    if (!events.empty()) {
      ASSERT_TRUE(next->has_value());
      EXPECT_EQ(storage::DecodeSequence(**next), events.size() + 1);
    }
    std::map<std::string, int64_t> held;
    ASSERT_TRUE(store_
                    .Scan(Table::kHolds, "", "",
                          [&](std::string_view, std::string_view v) {
                            inv::Reservation r;
                            EXPECT_TRUE(r.ParseFromArray(v.data(), static_cast<int>(v.size())));
                            EXPECT_EQ(r.state(), inv::RESERVATION_STATE_HELD);
                            for (const auto& l : r.lines()) {
                              held[fmt::format("{}/{}", l.sku(), l.location())] += l.quantity();
                            }
                            return true;
                          })
                    .ok());
    ASSERT_TRUE(store_
                    .Scan(Table::kStock, "", "",
                          [&](std::string_view, std::string_view v) {
                            inv::StockLevel l;
                            EXPECT_TRUE(l.ParseFromArray(v.data(), static_cast<int>(v.size())));
                            std::string key = fmt::format("{}/{}", l.sku(), l.location());
                            EXPECT_EQ(l.reserved(), held[key]) << key;
                            EXPECT_EQ(l.available(), l.on_hand() - l.reserved()) << key;
                            EXPECT_GE(l.on_hand(), 0) << key;
                            if (!l.allow_backorder()) {
                              EXPECT_GE(l.available(), 0) << key;
                            }
                            // The stored level is exactly what its last event announced.
                            EXPECT_GE(l.sequence(), 1u);
                            if (l.sequence() >= 1 && l.sequence() <= events.size()) {
                              const auto& e = events[l.sequence() - 1];
                              EXPECT_TRUE(e.has_stock_changed());
                              EXPECT_TRUE(ProtoEq(e.stock_changed().level(), l)) << key;
                            }
                            return true;
                          })
                    .ok());
  }

  storage::MemoryStore store_;
  core::FakeClock clock_;
  core::CoreOptions options_;
  std::unique_ptr<InventoryCore> core_;
  bool check_invariants_ = true;
};

// =========================================================================================
// AdjustStock

TEST_F(CoreTest, AdjustDeltaCreatesLevelWithOneEvent) {
  auto r = Adjust("sku-1", 10);
  ASSERT_OK(r);
  EXPECT_FALSE(r->replayed());
  EXPECT_EQ(r->sequence(), 1u);
  const auto& l = r->level();
  EXPECT_EQ(l.sku(), "sku-1");
  EXPECT_EQ(l.location(), "default");
  EXPECT_EQ(l.on_hand(), 10);
  EXPECT_EQ(l.reserved(), 0);
  EXPECT_EQ(l.available(), 10);
  EXPECT_EQ(l.version(), 1u);
  EXPECT_EQ(l.sequence(), 1u);
  EXPECT_EQ(l.updated_at_ms(), kStart);
  EXPECT_FALSE(l.allow_backorder());
  EXPECT_TRUE(ProtoEq(Level("sku-1"), l));

  auto events = Outbox();
  ASSERT_EQ(events.size(), 1u);
  const auto& e = events[0];
  EXPECT_EQ(e.type(), "inventory.stock.changed");
  EXPECT_EQ(e.key(), "sku-1");
  EXPECT_EQ(e.sequence(), 1u);
  EXPECT_EQ(e.occurred_at().seconds(), kStart / 1000);
  ASSERT_TRUE(e.has_stock_changed());
  EXPECT_EQ(e.stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_ADJUST);
  EXPECT_EQ(e.stock_changed().delta_on_hand(), 10);
  EXPECT_EQ(e.stock_changed().delta_reserved(), 0);
  EXPECT_EQ(e.stock_changed().reason(), "test");
  EXPECT_TRUE(ProtoEq(e.stock_changed().level(), l));
}

TEST_F(CoreTest, AdjustSetAndNegativeDelta) {
  ASSERT_OK(Adjust("sku-1", 10));
  auto set = Adjust("sku-1", 4, inv::ADJUST_MODE_SET);
  ASSERT_OK(set);
  EXPECT_EQ(set->level().on_hand(), 4);
  EXPECT_EQ(set->level().version(), 2u);
  EXPECT_EQ(Outbox().back().stock_changed().delta_on_hand(), -6);

  auto minus = Adjust("sku-1", -3);
  ASSERT_OK(minus);
  EXPECT_EQ(minus->level().on_hand(), 1);
  EXPECT_EQ(EventCount(), 3u);

  // SET to the same value is still a change of the level (version, event).
  auto same = Adjust("sku-1", 1, inv::ADJUST_MODE_SET);
  ASSERT_OK(same);
  EXPECT_EQ(same->level().version(), 4u);
  EXPECT_EQ(EventCount(), 4u);
}

TEST_F(CoreTest, AdjustRejectsNegativeOnHand) {
  ASSERT_OK(Adjust("sku-1", 1));
  auto r = Adjust("sku-1", -2);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "on_hand of sku 'sku-1'"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("negative"));
  EXPECT_EQ(Level("sku-1").on_hand(), 1);
  EXPECT_EQ(Level("sku-1").version(), 1u);
  EXPECT_EQ(EventCount(), 1u);

  // A negative delta on a level that does not exist creates nothing.
  EXPECT_TRUE(IsError(Adjust("sku-new", -5), absl::StatusCode::kFailedPrecondition, "negative"));
  EXPECT_FALSE(HasLevel("sku-new"));
  // SET below zero is invalid input, not a precondition.
  EXPECT_TRUE(IsError(Adjust("sku-1", -1, inv::ADJUST_MODE_SET),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  EXPECT_EQ(EventCount(), 1u);
}

TEST_F(CoreTest, AdjustBelowReservedRejectedUnlessBackorder) {
  ASSERT_OK(Adjust("sku-1", 10));
  ASSERT_OK(Reserve({{"sku-1", 6}}));
  size_t events = EventCount();

  EXPECT_TRUE(IsError(Adjust("sku-1", 5, inv::ADJUST_MODE_SET),
                      absl::StatusCode::kFailedPrecondition, "negative available"));
  EXPECT_TRUE(IsError(Adjust("sku-1", -5), absl::StatusCode::kFailedPrecondition,
                      "on_hand 5, reserved 6"));
  EXPECT_EQ(EventCount(), events);
  EXPECT_EQ(Level("sku-1").on_hand(), 10);

  // Allowing backorder in the same request lets on_hand go below reserved.
  inv::AdjustStockRequest r;
  r.set_sku("sku-1");
  r.set_mode(inv::ADJUST_MODE_SET);
  r.set_quantity(4);
  r.set_allow_backorder(true);
  auto ok = Adjust(r);
  ASSERT_OK(ok);
  EXPECT_EQ(ok->level().on_hand(), 4);
  EXPECT_EQ(ok->level().reserved(), 6);
  EXPECT_EQ(ok->level().available(), -2);
  EXPECT_TRUE(ok->level().allow_backorder());
  EXPECT_EQ(EventCount(), events + 1);

  // Turning backorder off while available is negative is refused.
  inv::AdjustStockRequest off;
  off.set_sku("sku-1");
  off.set_mode(inv::ADJUST_MODE_DELTA);
  off.set_quantity(0);
  off.set_allow_backorder(false);
  EXPECT_TRUE(IsError(Adjust(off), absl::StatusCode::kFailedPrecondition, "negative available"));
  EXPECT_TRUE(Level("sku-1").allow_backorder());
}

TEST_F(CoreTest, BackorderAllowsReservingBeyondOnHand) {
  inv::AdjustStockRequest r;
  r.set_sku("pre-order");
  r.set_mode(inv::ADJUST_MODE_DELTA);
  r.set_quantity(0);  // only the policy changes: allowed with allow_backorder set
  r.set_allow_backorder(true);
  auto created = Adjust(r);
  ASSERT_OK(created);
  EXPECT_EQ(created->level().on_hand(), 0);
  EXPECT_TRUE(created->level().allow_backorder());

  auto hold = Reserve({{"pre-order", 5}});
  ASSERT_OK(hold);
  EXPECT_EQ(hold->levels(0).available(), -5);
  auto more = Reserve({{"pre-order", 3}});
  ASSERT_OK(more);
  EXPECT_EQ(more->levels(0).available(), -8);
  EXPECT_EQ(Level("pre-order").reserved(), 8);
  // on_hand itself never goes negative: a backordered hold cannot be committed before the
  // stock arrives (FAILED_PRECONDITION, nothing changes)...
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Commit(hold->reservation().reservation_id()),
                      absl::StatusCode::kFailedPrecondition, "cannot be committed yet"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("pre-order").on_hand(), 0);
  // ...restock, then commit.
  ASSERT_OK(Adjust("pre-order", 10));
  ASSERT_OK(Commit(hold->reservation().reservation_id()));
  EXPECT_EQ(Level("pre-order").on_hand(), 5);
  EXPECT_EQ(Level("pre-order").reserved(), 3);
}

// =========================================================================================
// Reserve

TEST_F(CoreTest, ReserveReturnsHeldReservationAndLevels) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 5, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  size_t before = EventCount();

  auto r = Reserve({{"sku-a", 3}, {"sku-b", 2, "wh-2"}});
  ASSERT_OK(r);
  const auto& res = r->reservation();
  EXPECT_THAT(res.reservation_id(), StartsWith("rsv-"));
  EXPECT_EQ(res.state(), inv::RESERVATION_STATE_HELD);
  EXPECT_EQ(res.created_at_ms(), kStart);
  EXPECT_EQ(res.expires_at_ms(), kStart + kDefaultTtl);
  EXPECT_FALSE(res.owned_by_order());
  ASSERT_EQ(res.lines_size(), 2);
  EXPECT_EQ(res.lines(0).sku(), "sku-a");
  EXPECT_EQ(res.lines(0).location(), "default");
  EXPECT_EQ(res.lines(0).quantity(), 3);
  EXPECT_EQ(res.lines(1).sku(), "sku-b");
  EXPECT_EQ(res.lines(1).location(), "wh-2");
  EXPECT_EQ(res.lines(1).quantity(), 2);

  ASSERT_EQ(r->levels_size(), 2);
  EXPECT_EQ(r->levels(0).sku(), "sku-a");
  EXPECT_EQ(r->levels(0).on_hand(), 10);
  EXPECT_EQ(r->levels(0).reserved(), 3);
  EXPECT_EQ(r->levels(0).available(), 7);
  EXPECT_EQ(r->levels(0).version(), 2u);
  EXPECT_EQ(r->levels(1).sku(), "sku-b");
  EXPECT_EQ(r->levels(1).reserved(), 2);
  EXPECT_EQ(r->levels(1).available(), 3);
  EXPECT_TRUE(ProtoEq(Level("sku-a"), r->levels(0)));
  EXPECT_TRUE(ProtoEq(Level("sku-b", "wh-2"), r->levels(1)));

  // One event per affected level; the response's sequence is the last of them.
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(r->sequence(), events.back().sequence());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RESERVE);
    EXPECT_EQ(events[i].stock_changed().reservation_id(), res.reservation_id());
    EXPECT_EQ(events[i].stock_changed().delta_on_hand(), 0);
    EXPECT_TRUE(ProtoEq(events[i].stock_changed().level(), r->levels(static_cast<int>(i))));
  }
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), 3);
  EXPECT_EQ(events[1].stock_changed().delta_reserved(), 2);

  auto got = core_->GetReservation(res.reservation_id());
  ASSERT_OK(got);
  EXPECT_TRUE(ProtoEq(*got, res));

  auto ttl = Reserve({{"sku-a", 1}}, "", "", 60'000);
  ASSERT_OK(ttl);
  EXPECT_EQ(ttl->reservation().expires_at_ms(), kStart + 60'000);
}

TEST_F(CoreTest, ReserveSumsDuplicateLines) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 10));
  size_t before = EventCount();
  auto r = Reserve({{"sku-a", 2}, {"sku-b", 1}, {"sku-a", 3, "default"}});
  ASSERT_OK(r);
  ASSERT_EQ(r->reservation().lines_size(), 2);
  EXPECT_EQ(r->reservation().lines(0).sku(), "sku-a");
  EXPECT_EQ(r->reservation().lines(0).quantity(), 5);
  EXPECT_EQ(r->reservation().lines(1).sku(), "sku-b");
  EXPECT_EQ(r->reservation().lines(1).quantity(), 1);
  ASSERT_EQ(r->levels_size(), 2);
  EXPECT_EQ(Level("sku-a").reserved(), 5);
  EXPECT_EQ(Level("sku-a").version(), 2u);  // one change, not two
  EXPECT_EQ(EventCount(), before + 2);

  // The summed quantity is what must be available.
  EXPECT_TRUE(IsError(Reserve({{"sku-b", 5}, {"sku-b", 5}}),
                      absl::StatusCode::kFailedPrecondition, "requested 10, available 9"));
}

TEST_F(CoreTest, ReserveIsAllOrNothing) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 1));
  size_t before = EventCount();
  size_t commits = store_.commits();

  auto r = Reserve({{"sku-a", 5}, {"sku-b", 2}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "sku 'sku-b'"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("available 1"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("requested 2"));

  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").version(), 1u);
  EXPECT_EQ(Level("sku-b").reserved(), 0);
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(store_.Size(Table::kHolds), 0u);
  EXPECT_EQ(store_.commits(), commits);  // nothing at all was written
  EXPECT_EQ(core_->stats().held_reservations, 0u);
}

TEST_F(CoreTest, InsufficientStockNamesSkuAndAvailable) {
  ASSERT_OK(Adjust("sku-a", 7));
  ASSERT_OK(Reserve({{"sku-a", 3}}));
  auto r = Reserve({{"sku-a", 5}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition,
                      "insufficient stock for sku 'sku-a' at location 'default': requested 5, "
                      "available 4"));
}

TEST_F(CoreTest, ReserveUnknownSkuIsNotFound) {
  ASSERT_OK(Adjust("sku-a", 10));
  size_t before = EventCount();
  auto r = Reserve({{"sku-a", 1}, {"ghost", 1}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kNotFound, "sku 'ghost'"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("lines[1]"));
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 1, "wh-9"}}), absl::StatusCode::kNotFound,
                      "location 'wh-9'"));
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(EventCount(), before);
}

TEST_F(CoreTest, NotFoundNamesTheRequestLineIndex) {
  // Duplicate lines are summed before the stock check; the error must still name the line
  // of the request, not the index in the summed list.
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 1}, {"sku-a", 1}, {"ghost", 1}});
  EXPECT_TRUE(IsError(r, absl::StatusCode::kNotFound, "lines[2]"));
}

TEST_F(CoreTest, ClientChosenReservationIdReusedIsAlreadyExists) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 1}}, "cart-42");
  ASSERT_OK(r);
  EXPECT_EQ(r->reservation().reservation_id(), "cart-42");
  size_t before = EventCount();

  EXPECT_TRUE(IsError(Reserve({{"sku-a", 1}}, "cart-42"), absl::StatusCode::kAlreadyExists,
                      "reservation_id 'cart-42' already exists"));
  ASSERT_OK(Commit("cart-42"));
  before = EventCount();
  // Closed reservations keep their id too.
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 1}}, "cart-42"), absl::StatusCode::kAlreadyExists,
                      "cart-42"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 9);
}

TEST_F(CoreTest, GeneratedIdsNeverCollideWithClientChosenIds) {
  // Generated ids are "rsv-<store id prefix>-<sequence>"; clients may not use the "rsv-"
  // prefix, so a later generated hold can never overwrite a client's hold.
  ASSERT_OK(Adjust("sku-a", 100));
  auto first = Reserve({{"sku-a", 1}});
  ASSERT_OK(first);
  std::string prefix = first->reservation().reservation_id();
  prefix = prefix.substr(0, prefix.rfind('-') + 1);  // "rsv-xxxxxx-"
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 2}}, fmt::format("{}{}", prefix, 4)),
                      absl::StatusCode::kInvalidArgument, "reservation_id"));
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 2}}, "rsv-mine"), absl::StatusCode::kInvalidArgument,
                      "reserved for ids the server generates"));
  EXPECT_EQ(EventCount(), before);
  // A client id without the prefix is fine, and generated ids keep coming.
  ASSERT_OK(Reserve({{"sku-a", 2}}, "cart-7"));
  auto generated = Reserve({{"sku-a", 4}});
  ASSERT_OK(generated);
  auto order = CreateOrder({"sku-a"});
  ASSERT_OK(order);
  EXPECT_NE(order->reservation_id(), generated->reservation().reservation_id());
  EXPECT_EQ(Level("sku-a").reserved(), 1 + 2 + 4 + 1);
  EXPECT_EQ(store_.Size(Table::kHolds), 4u);
  Reopen();
  EXPECT_EQ(Level("sku-a").reserved(), 8);
}

// =========================================================================================
// Commit and Release

TEST_F(CoreTest, CommitDeductsOnHandAndReserved) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 10));
  auto r = Reserve({{"sku-a", 3}, {"sku-b", 2}});
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  size_t before = EventCount();
  clock_.Advance(500);

  auto c = Commit(id);
  ASSERT_OK(c);
  EXPECT_FALSE(c->replayed());
  EXPECT_EQ(c->reservation().state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(c->reservation().closed_at_ms(), kStart + 500);
  ASSERT_EQ(c->levels_size(), 2);
  EXPECT_EQ(c->levels(0).on_hand(), 7);
  EXPECT_EQ(c->levels(0).reserved(), 0);
  EXPECT_EQ(c->levels(0).available(), 7);
  EXPECT_EQ(c->levels(1).on_hand(), 8);
  EXPECT_TRUE(ProtoEq(Level("sku-a"), c->levels(0)));

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(c->sequence(), events.back().sequence());
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_COMMIT);
  EXPECT_EQ(events[0].stock_changed().delta_on_hand(), -3);
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), -3);
  EXPECT_EQ(events[0].stock_changed().reservation_id(), id);

  auto got = core_->GetReservation(id);
  ASSERT_OK(got);
  EXPECT_EQ(got->state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(store_.Size(Table::kHolds), 0u);
  EXPECT_EQ(store_.Size(Table::kReservations), 1u);
}

TEST_F(CoreTest, CommitTwiceAndReleaseAfterCommitAreRejected) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 3}});
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  ASSERT_OK(Commit(id));
  size_t before = EventCount();

  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition,
                      fmt::format("reservation '{}' is already COMMITTED", id)));
  EXPECT_TRUE(
      IsError(Release(id), absl::StatusCode::kFailedPrecondition, "already COMMITTED"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").on_hand(), 7);
}

TEST_F(CoreTest, CommitOrReleaseUnknownReservationIsNotFound) {
  EXPECT_TRUE(IsError(Commit("nope"), absl::StatusCode::kNotFound, "reservation 'nope'"));
  EXPECT_TRUE(IsError(Release("nope"), absl::StatusCode::kNotFound, "reservation 'nope'"));
  EXPECT_TRUE(
      IsError(core_->GetReservation("nope"), absl::StatusCode::kNotFound, "reservation 'nope'"));
}

TEST_F(CoreTest, ReleaseReturnsStockToAvailable) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 3}});
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  size_t before = EventCount();

  auto rel = Release(id, "customer left");
  ASSERT_OK(rel);
  EXPECT_EQ(rel->reservation().state(), inv::RESERVATION_STATE_RELEASED);
  EXPECT_EQ(rel->reservation().close_reason(), "customer left");
  ASSERT_EQ(rel->levels_size(), 1);
  EXPECT_EQ(rel->levels(0).on_hand(), 10);
  EXPECT_EQ(rel->levels(0).reserved(), 0);
  EXPECT_EQ(rel->levels(0).available(), 10);
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RELEASE);
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), -3);
  EXPECT_EQ(events[0].stock_changed().delta_on_hand(), 0);
  EXPECT_EQ(events[0].stock_changed().reason(), "customer left");

  EXPECT_TRUE(IsError(Release(id), absl::StatusCode::kFailedPrecondition, "already RELEASED"));
  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition, "already RELEASED"));
  EXPECT_EQ(core_->GetReservation(id)->state(), inv::RESERVATION_STATE_RELEASED);
}

// =========================================================================================
// Expiry

TEST_F(CoreTest, ExpiredHoldIsRefusedThenSweptBackToStock) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 4}}, "", "", 5'000);
  ASSERT_OK(r);
  std::string id = r->reservation().reservation_id();
  EXPECT_EQ(r->reservation().expires_at_ms(), kStart + 5'000);

  clock_.Advance(4'999);
  auto none = ExpireDue();
  ASSERT_OK(none);
  EXPECT_EQ(none->expired_holds, 0u);
  EXPECT_EQ(core_->GetReservation(id)->state(), inv::RESERVATION_STATE_HELD);

  clock_.Advance(1);  // expires_at is the first instant the hold is no longer valid
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition, "expired"));
  EXPECT_TRUE(IsError(Release(id), absl::StatusCode::kFailedPrecondition, "expired"));
  EXPECT_EQ(Level("sku-a").reserved(), 4);  // not swept yet
  EXPECT_EQ(EventCount(), before);

  auto swept = ExpireDue();
  ASSERT_OK(swept);
  EXPECT_EQ(swept->expired_holds, 1u);
  EXPECT_EQ(swept->expired_orders, 0u);
  auto got = core_->GetReservation(id);
  ASSERT_OK(got);
  EXPECT_EQ(got->state(), inv::RESERVATION_STATE_EXPIRED);
  EXPECT_EQ(got->close_reason(), "hold expired");
  EXPECT_EQ(got->closed_at_ms(), kStart + 5'000);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 10);
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_EXPIRE);
  EXPECT_EQ(events[0].stock_changed().delta_reserved(), -4);

  EXPECT_TRUE(IsError(Commit(id), absl::StatusCode::kFailedPrecondition, "already EXPIRED"));
  auto again = ExpireDue();
  ASSERT_OK(again);
  EXPECT_EQ(again->expired_holds, 0u);
  EXPECT_EQ(core_->stats().held_reservations, 0u);
}

TEST_F(CoreTest, ClosedReservationsAndFinishedOrdersAreGonePastTheHistoryRetention) {
  options_.history_retention_ms = 60'000;
  Reopen();
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 1}}, "cart-1"));
  ASSERT_OK(Commit("cart-1"));
  auto held = Reserve({{"sku-a", 1}}, "", "", 7LL * 24 * 3600 * 1000);
  ASSERT_OK(held);
  auto cancelled = CreateOrder({"sku-a"});
  ASSERT_OK(cancelled);
  ASSERT_OK(Cancel(cancelled->order_id()));
  auto confirmed = CreateOrder({"sku-a"}, {}, "", 7LL * 24 * 3600 * 1000);
  ASSERT_OK(confirmed);

  clock_.Advance(60'000);  // exactly the retention: still kept
  EXPECT_EQ(core_->GetReservation("cart-1")->state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(core_->GetOrder(cancelled->order_id())->status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_TRUE(IsError(Commit("cart-1"), absl::StatusCode::kFailedPrecondition,
                      "already COMMITTED"));

  clock_.Advance(1);
  EXPECT_TRUE(IsError(core_->GetReservation("cart-1"), absl::StatusCode::kNotFound,
                      "reservation 'cart-1' not found"));
  EXPECT_TRUE(IsError(core_->GetOrder(cancelled->order_id()), absl::StatusCode::kNotFound,
                      "not found"));
  EXPECT_TRUE(IsError(Commit("cart-1"), absl::StatusCode::kNotFound, "reservation 'cart-1'"));
  EXPECT_TRUE(IsError(Cancel(cancelled->order_id()), absl::StatusCode::kNotFound, "not found"));
  // What is still under way stays, however old.
  EXPECT_EQ(core_->GetReservation(held->reservation().reservation_id())->state(),
            inv::RESERVATION_STATE_HELD);
  EXPECT_EQ(core_->GetOrder(confirmed->order_id())->status(), ord::ORDER_STATUS_CONFIRMED);
  // A client's reservation id is free again.
  auto reused = Reserve({{"sku-a", 2}}, "cart-1");
  ASSERT_OK(reused);
  EXPECT_EQ(reused->reservation().state(), inv::RESERVATION_STATE_HELD);
  ASSERT_OK(Commit("cart-1"));
  EXPECT_EQ(Level("sku-a").on_hand(), 7);
}

TEST(HistoryTest, WhatExpiresAndWhatIsKept) {
  const int64_t kDay = 24LL * 3600 * 1000;
  inv::Reservation closed;
  closed.set_state(inv::RESERVATION_STATE_RELEASED);
  closed.set_closed_at_ms(kStart);
  inv::Reservation held;
  held.set_state(inv::RESERVATION_STATE_HELD);
  ord::Order delivered;
  delivered.set_status(ord::ORDER_STATUS_DELIVERED);
  delivered.set_updated_at_ms(kStart);
  ord::Order packing = delivered;
  packing.set_status(ord::ORDER_STATUS_PACKING);

  EXPECT_FALSE(core::ReservationExpired(closed, kStart + kDay, kDay));
  EXPECT_TRUE(core::ReservationExpired(closed, kStart + kDay + 1, kDay));
  EXPECT_FALSE(core::ReservationExpired(closed, kStart + 1000 * kDay, 0));  // 0: for good
  EXPECT_FALSE(core::ReservationExpired(held, kStart + 1000 * kDay, kDay));
  EXPECT_TRUE(core::OrderExpired(delivered, kStart + kDay + 1, kDay));
  EXPECT_FALSE(core::OrderExpired(packing, kStart + 1000 * kDay, kDay));
  for (auto status : {ord::ORDER_STATUS_CANCELLED, ord::ORDER_STATUS_EXPIRED}) {
    ord::Order o = delivered;
    o.set_status(status);
    EXPECT_TRUE(core::OrderExpired(o, kStart + kDay + 1, kDay)) << status;
  }
  for (auto status : {ord::ORDER_STATUS_CONFIRMED, ord::ORDER_STATUS_PAID,
                      ord::ORDER_STATUS_DISPATCHED}) {
    ord::Order o = delivered;
    o.set_status(status);
    EXPECT_FALSE(core::OrderExpired(o, kStart + 1000 * kDay, kDay)) << status;
  }

  // Stored records, as the compaction filter sees them.
  const int64_t later = kStart + kDay + 1;
  EXPECT_TRUE(core::HistoryExpired(Table::kReservations, closed.SerializeAsString(), later, kDay));
  EXPECT_TRUE(core::HistoryExpired(Table::kOrders, delivered.SerializeAsString(), later, kDay));
  EXPECT_FALSE(core::HistoryExpired(Table::kOrders, packing.SerializeAsString(), later, kDay));
  EXPECT_FALSE(core::HistoryExpired(Table::kHolds, closed.SerializeAsString(), later, kDay));
  EXPECT_FALSE(core::HistoryExpired(Table::kReservations, "\xff\xff not a record", later, kDay));
}

TEST_F(CoreTest, ExpiringOrderHoldExpiresTheOrder) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a", "sku-a"}, {}, "", 2'000);
  ASSERT_OK(o);
  EXPECT_EQ(o->hold_expires_at_ms(), kStart + 2'000);
  clock_.Advance(2'000);
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Pay(o->order_id()), absl::StatusCode::kFailedPrecondition, "expired"));
  EXPECT_EQ(EventCount(), before);

  auto swept = ExpireDue();
  ASSERT_OK(swept);
  EXPECT_EQ(swept->expired_holds, 1u);
  EXPECT_EQ(swept->expired_orders, 1u);
  auto order = core_->GetOrder(o->order_id());
  ASSERT_OK(order);
  EXPECT_EQ(order->status(), ord::ORDER_STATUS_EXPIRED);
  EXPECT_EQ(order->details(), "stock hold expired before payment");
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(core_->GetReservation(o->reservation_id())->state(),
            inv::RESERVATION_STATE_EXPIRED);

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_EXPIRE);
  EXPECT_EQ(events[0].stock_changed().order_id(), o->order_id());
  EXPECT_EQ(events[1].type(), "order.status.changed");
  EXPECT_EQ(events[1].key(), o->order_id());
  EXPECT_EQ(events[1].order_status_changed().status(), ord::ORDER_STATUS_EXPIRED);
  EXPECT_EQ(events[1].order_status_changed().status_name(), "EXPIRED");
  EXPECT_EQ(events[1].order_status_changed().previous_status(), ord::ORDER_STATUS_CONFIRMED);

  EXPECT_TRUE(IsError(Pay(o->order_id()), absl::StatusCode::kFailedPrecondition, "is EXPIRED"));
  EXPECT_TRUE(
      IsError(Cancel(o->order_id()), absl::StatusCode::kFailedPrecondition, "is EXPIRED"));
  EXPECT_TRUE(core::IsTerminal(ord::ORDER_STATUS_EXPIRED));
}

class SmallSweepTest : public CoreTest {
 protected:
  SmallSweepTest() { options_.max_expiries_per_sweep = 2; }
};

TEST_F(SmallSweepTest, ExpireDueIsBoundedPerCall) {
  ASSERT_OK(Adjust("sku-a", 10));
  for (int i = 0; i < 5; ++i) ASSERT_OK(Reserve({{"sku-a", 1}}, "", "", 1'000));
  clock_.Advance(1'000);
  EXPECT_EQ(ExpireDue()->expired_holds, 2u);
  EXPECT_EQ(ExpireDue()->expired_holds, 2u);
  EXPECT_EQ(ExpireDue()->expired_holds, 1u);
  EXPECT_EQ(ExpireDue()->expired_holds, 0u);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
}

// =========================================================================================
// Idempotency

TEST_F(CoreTest, SameKeySameRequestIsReplayedWithoutNewEvents) {
  auto a1 = Adjust("sku-a", 10, inv::ADJUST_MODE_DELTA, "adj-1");
  ASSERT_OK(a1);
  auto a2 = Adjust("sku-a", 10, inv::ADJUST_MODE_DELTA, "adj-1");
  ASSERT_OK(a2);
  EXPECT_FALSE(a1->replayed());
  EXPECT_TRUE(a2->replayed());
  EXPECT_EQ(a2->sequence(), a1->sequence());
  EXPECT_TRUE(ProtoEq(a2->level(), a1->level()));
  EXPECT_EQ(Level("sku-a").on_hand(), 10);

  auto r1 = Reserve({{"sku-a", 2}}, "", "rsv-key");
  ASSERT_OK(r1);
  size_t after_reserve = EventCount();
  // An empty location and the default location are the same request.
  auto r2 = Reserve({{"sku-a", 2, "default"}}, "", "rsv-key");
  ASSERT_OK(r2);
  EXPECT_TRUE(r2->replayed());
  EXPECT_EQ(r2->reservation().reservation_id(), r1->reservation().reservation_id());
  EXPECT_EQ(r2->sequence(), r1->sequence());
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  EXPECT_EQ(EventCount(), after_reserve);

  std::string id = r1->reservation().reservation_id();
  auto c1 = Commit(id, "commit-key");
  ASSERT_OK(c1);
  auto c2 = Commit(id, "commit-key");
  ASSERT_OK(c2);
  EXPECT_TRUE(c2->replayed());
  EXPECT_EQ(c2->reservation().state(), inv::RESERVATION_STATE_COMMITTED);
  EXPECT_EQ(c2->sequence(), c1->sequence());

  auto rel_hold = Reserve({{"sku-a", 1}});
  ASSERT_OK(rel_hold);
  auto l1 = Release(rel_hold->reservation().reservation_id(), "r", "release-key");
  ASSERT_OK(l1);
  auto l2 = Release(rel_hold->reservation().reservation_id(), "r", "release-key");
  ASSERT_OK(l2);
  EXPECT_TRUE(l2->replayed());

  auto o1 = CreateOrder({"sku-a"}, {}, "order-key");
  ASSERT_OK(o1);
  auto o2 = CreateOrder({"sku-a"}, {}, "order-key");
  ASSERT_OK(o2);
  EXPECT_TRUE(o2->replayed());
  EXPECT_EQ(o2->order_id(), o1->order_id());
  EXPECT_EQ(o2->reservation_id(), o1->reservation_id());
  EXPECT_EQ(store_.Size(Table::kOrders), 1u);

  auto p1 = Pay(o1->order_id(), "ref", "pay-key");
  ASSERT_OK(p1);
  auto p2 = Pay(o1->order_id(), "ref", "pay-key");
  ASSERT_OK(p2);
  EXPECT_TRUE(p2->replayed());
  EXPECT_EQ(p2->sequence(), p1->sequence());
  auto v1 = Advance(o1->order_id(), ord::ORDER_STATUS_PACKING, "", "adv-key");
  ASSERT_OK(v1);
  auto v2 = Advance(o1->order_id(), ord::ORDER_STATUS_PACKING, "", "adv-key");
  ASSERT_OK(v2);
  EXPECT_TRUE(v2->replayed());
  auto x1 = Cancel(o1->order_id(), "", "cancel-key");
  ASSERT_OK(x1);
  size_t events = EventCount();
  auto x2 = Cancel(o1->order_id(), "", "cancel-key");
  ASSERT_OK(x2);
  EXPECT_TRUE(x2->replayed());
  EXPECT_EQ(x2->order().status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_EQ(EventCount(), events);
  EXPECT_EQ(Level("sku-a").on_hand(), 8);  // 10 - 2 committed; the cancelled unit came back
}

TEST_F(CoreTest, SameKeyDifferentRequestIsAlreadyExists) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 2}}, "", "k-1"));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 3}}, "", "k-1"), absl::StatusCode::kAlreadyExists,
                      "idempotency_key 'k-1' was already used with a different"));
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  EXPECT_EQ(EventCount(), before);
}

TEST_F(CoreTest, SameKeyOnAnotherMethodIsAlreadyExists) {
  ASSERT_OK(Adjust("sku-a", 10, inv::ADJUST_MODE_DELTA, "k-1"));
  size_t before = EventCount();
  auto r = Reserve({{"sku-a", 2}}, "", "k-1");
  EXPECT_TRUE(IsError(r, absl::StatusCode::kAlreadyExists, "inventory.v1.AdjustStock"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("inventory.v1.Reserve"));
  EXPECT_TRUE(IsError(CreateOrder({"sku-a"}, {}, "k-1"), absl::StatusCode::kAlreadyExists,
                      "order.v1.CreateOrder"));
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(EventCount(), before);
}

TEST_F(CoreTest, KeyIsFreeAgainAfterRetention) {
  ASSERT_OK(Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1"));
  clock_.Advance(options_.idempotency_retention_ms);  // still inside the window
  auto replay = Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1");
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed());
  clock_.Advance(1);
  auto fresh = Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1");
  ASSERT_OK(fresh);
  EXPECT_FALSE(fresh->replayed());
  EXPECT_EQ(fresh->level().on_hand(), 2);
  auto replay2 = Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1");
  ASSERT_OK(replay2);
  EXPECT_TRUE(replay2->replayed());
  EXPECT_EQ(Level("sku-a").on_hand(), 2);
}

TEST_F(CoreTest, FailedCommandCanBeRetriedWithTheSameKey) {
  ASSERT_OK(Adjust("sku-a", 1));
  size_t records = store_.Size(Table::kIdempotency);
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 5}}, "", "k-1"), absl::StatusCode::kFailedPrecondition,
                      "available 1"));
  EXPECT_EQ(store_.Size(Table::kIdempotency), records);  // failures record nothing
  ASSERT_OK(Adjust("sku-a", 10));
  auto ok = Reserve({{"sku-a", 5}}, "", "k-1");
  ASSERT_OK(ok);
  EXPECT_FALSE(ok->replayed());
  auto again = Reserve({{"sku-a", 5}}, "", "k-1");
  ASSERT_OK(again);
  EXPECT_TRUE(again->replayed());
  EXPECT_EQ(again->reservation().reservation_id(), ok->reservation().reservation_id());
  EXPECT_EQ(Level("sku-a").reserved(), 5);

  // The stored record says which method and request it belongs to.
  auto stored = store_.Get(Table::kIdempotency, "k-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  int64_t created = 0;
  std::string_view payload;
  ASSERT_TRUE(storage::DecodeTimestamped(**stored, &created, &payload));
  EXPECT_EQ(created, kStart);
  internal::v1::IdempotencyRecord record;
  ASSERT_TRUE(record.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  EXPECT_EQ(record.method(), "inventory.v1.Reserve");
  EXPECT_EQ(record.created_at_ms(), kStart);
}

TEST_F(CoreTest, ConcurrentDuplicatesOfOneKeyApplyOnce) {
  ASSERT_OK(Adjust("sku-a", 100));
  size_t before = EventCount();
  constexpr int kCalls = 50;
  Collector<inv::ReserveResponse> collector(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    core_->Reserve(ReserveReq({{"sku-a", 1}}, "", "burst"), collector.Callback());
  }
  auto results = collector.Wait();
  ASSERT_EQ(results.size(), static_cast<size_t>(kCalls));
  int fresh = 0;
  std::string id;
  for (const auto& r : results) {
    ASSERT_OK(r);
    if (!r->replayed()) ++fresh;
    if (id.empty()) id = r->reservation().reservation_id();
    EXPECT_EQ(r->reservation().reservation_id(), id);
  }
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(Level("sku-a").reserved(), 1);
  EXPECT_EQ(EventCount(), before + 1);
}

// =========================================================================================
// Validation: INVALID_ARGUMENT naming the field; nothing reaches the writer.

TEST_F(CoreTest, ReserveValidationNamesTheField) {
  ASSERT_OK(Adjust("sku-a", 10));
  size_t commits = store_.commits();
  struct Case {
    const char* name;
    inv::ReserveRequest request;
    const char* field;
  };
  std::vector<Case> cases;
  cases.push_back({"no lines", ReserveReq({}), "lines: at least one line"});
  cases.push_back({"empty sku", ReserveReq({{"", 1}}), "lines[0].sku: is required"});
  cases.push_back({"zero quantity", ReserveReq({{"sku-a", 1}, {"sku-a", 0}}),
                   "lines[1].quantity: must be between 1 and 1000000, got 0"});
  cases.push_back({"negative quantity", ReserveReq({{"sku-a", -1}}), "lines[0].quantity"});
  cases.push_back({"huge quantity", ReserveReq({{"sku-a", 1'000'001}}), "lines[0].quantity"});
  std::vector<L> many(101, L{"sku-a", 1});
  cases.push_back({"too many lines", ReserveReq(many), "lines: at most 100 lines"});
  cases.push_back({"ttl too short", ReserveReq({{"sku-a", 1}}, "", "", 999), "ttl_ms"});
  cases.push_back({"ttl too long",
                   ReserveReq({{"sku-a", 1}}, "", "", 7LL * 24 * 3600 * 1000 + 1), "ttl_ms"});
  cases.push_back({"negative ttl", ReserveReq({{"sku-a", 1}}, "", "", -5), "ttl_ms"});
  cases.push_back({"space in sku", ReserveReq({{"bad sku", 1}}),
                   "lines[0].sku: may contain only"});
  cases.push_back({"control char in sku", ReserveReq({{"bad\x01", 1}}), "lines[0].sku"});
  cases.push_back({"non-ascii sku", ReserveReq({{"sk\xc3\xa9", 1}}), "lines[0].sku"});
  cases.push_back({"bad location", ReserveReq({{"sku-a", 1, "wh 1"}}), "lines[0].location"});
  cases.push_back({"long reservation id", ReserveReq({{"sku-a", 1}}, std::string(129, 'r')),
                   "reservation_id: at most 128 characters, got 129"});
  cases.push_back({"long sku", ReserveReq({{std::string(129, 's'), 1}}),
                   "lines[0].sku: at most 128"});
  cases.push_back({"bad key", ReserveReq({{"sku-a", 1}}, "", "key with spaces"),
                   "idempotency_key"});
  {
    auto r = ReserveReq({{"sku-a", 1}});
    r.set_order_id("o!");
    cases.push_back({"bad order id", r, "order_id"});
  }
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(IsError(Reserve(c.request), absl::StatusCode::kInvalidArgument, c.field));
  }
  // A 128-character id is fine.
  ASSERT_OK(Reserve({{"sku-a", 1}}, std::string(128, 'r')));
  EXPECT_EQ(store_.commits(), commits + 1);
}

TEST_F(CoreTest, AdjustValidationNamesTheField) {
  auto req = [](std::string sku, inv::AdjustMode mode, int64_t q) {
    inv::AdjustStockRequest r;
    r.set_sku(std::move(sku));
    r.set_mode(mode);
    r.set_quantity(q);
    return r;
  };
  EXPECT_TRUE(IsError(Adjust(req("", inv::ADJUST_MODE_DELTA, 1)),
                      absl::StatusCode::kInvalidArgument, "sku: is required"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_UNSPECIFIED, 1)),
                      absl::StatusCode::kInvalidArgument, "mode"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_DELTA, 0)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_DELTA, 1'000'001)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_DELTA, -1'000'001)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_SET, 1'000'001)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  auto loc = req("sku-a", inv::ADJUST_MODE_DELTA, 1);
  loc.set_location("a\tb");
  EXPECT_TRUE(IsError(Adjust(loc), absl::StatusCode::kInvalidArgument, "location"));
  auto reason = req("sku-a", inv::ADJUST_MODE_DELTA, 1);
  reason.set_reason(std::string(513, 'x'));
  EXPECT_TRUE(IsError(Adjust(reason), absl::StatusCode::kInvalidArgument, "reason: at most 512"));
  reason.set_reason("line\nbreak");
  EXPECT_TRUE(IsError(Adjust(reason), absl::StatusCode::kInvalidArgument, "reason"));
  auto key = req("sku-a", inv::ADJUST_MODE_DELTA, 1);
  key.set_idempotency_key(std::string(129, 'k'));
  EXPECT_TRUE(IsError(Adjust(key), absl::StatusCode::kInvalidArgument, "idempotency_key"));
  EXPECT_EQ(EventCount(), 0u);
  EXPECT_EQ(store_.commits(), 1u);  // only the store id written at open
}

TEST_F(CoreTest, CommitReleaseAndReadValidation) {
  EXPECT_TRUE(IsError(Commit(""), absl::StatusCode::kInvalidArgument, "reservation_id"));
  EXPECT_TRUE(IsError(Release("a b"), absl::StatusCode::kInvalidArgument, "reservation_id"));
  EXPECT_TRUE(IsError(Release("r-1", std::string(600, 'x')), absl::StatusCode::kInvalidArgument,
                      "reason"));
  EXPECT_TRUE(IsError(Commit("r-1", "bad key"), absl::StatusCode::kInvalidArgument,
                      "idempotency_key"));
  EXPECT_TRUE(IsError(core_->GetReservation(""), absl::StatusCode::kInvalidArgument,
                      "reservation_id"));
  EXPECT_TRUE(
      IsError(core_->GetOrder("bad id"), absl::StatusCode::kInvalidArgument, "order_id"));

  inv::GetStockRequest none;
  EXPECT_TRUE(IsError(core_->GetStock(none), absl::StatusCode::kInvalidArgument, "keys"));
  inv::GetStockRequest empty_sku;
  empty_sku.add_keys()->set_sku("sku-a");
  empty_sku.add_keys()->set_location("default");
  EXPECT_TRUE(
      IsError(core_->GetStock(empty_sku), absl::StatusCode::kInvalidArgument, "keys[1].sku"));
  inv::GetStockRequest too_many;
  for (int i = 0; i < 1001; ++i) too_many.add_keys()->set_sku(fmt::format("s{}", i));
  EXPECT_TRUE(IsError(core_->GetStock(too_many), absl::StatusCode::kInvalidArgument,
                      "keys: at most 1000 keys"));
}

TEST_F(CoreTest, OrderValidationNamesTheField) {
  ASSERT_OK(Adjust("sku-a", 10));
  size_t commits = store_.commits();
  auto base = [] {
    ord::CreateOrderRequest r;
    r.set_customer_id("cust-1");
    r.add_item_ids("sku-a");
    r.set_total_amount(1);
    return r;
  };
  auto r = base();
  r.clear_customer_id();
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "customer_id"));
  r = base();
  r.clear_item_ids();
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "item_ids"));
  r = base();
  r.add_item_ids("bad item");
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "item_ids[1]"));
  r = base();
  auto* line = r.add_lines();
  line->set_sku("sku-a");
  line->set_quantity(0);
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "lines[0].quantity"));
  r = base();
  r.set_total_amount(-1);
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "total_amount"));
  r.set_total_amount(std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "total_amount"));
  r = base();
  r.set_hold_ttl_ms(5);
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "hold_ttl_ms"));
  r = base();
  for (int i = 0; i < 100; ++i) r.add_item_ids("sku-a");
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "item_ids: at most 100"));

  EXPECT_TRUE(IsError(Pay(""), absl::StatusCode::kInvalidArgument, "order_id"));
  EXPECT_TRUE(IsError(Pay("o-1", std::string(513, 'p')), absl::StatusCode::kInvalidArgument,
                      "payment_reference"));
  EXPECT_TRUE(IsError(Advance("o-1", ord::ORDER_STATUS_PAID), absl::StatusCode::kInvalidArgument,
                      "target"));
  EXPECT_TRUE(IsError(Advance("o-1", ord::ORDER_STATUS_UNSPECIFIED),
                      absl::StatusCode::kInvalidArgument, "target"));
  EXPECT_TRUE(IsError(Advance("o-1", ord::ORDER_STATUS_PACKING, std::string(513, 'd')),
                      absl::StatusCode::kInvalidArgument, "details"));
  EXPECT_TRUE(IsError(Cancel("o 1"), absl::StatusCode::kInvalidArgument, "order_id"));
  EXPECT_EQ(store_.commits(), commits);
}

// =========================================================================================
// Orders

TEST_F(CoreTest, CreateOrderHoldsStockAndIsConfirmed) {
  ASSERT_OK(Adjust("sku-a", 5));
  ASSERT_OK(Adjust("sku-b", 5));
  ASSERT_OK(Adjust("sku-c", 5, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  size_t before = EventCount();
  clock_.Advance(1'234);

  auto o = CreateOrder({"sku-a", "sku-b", "sku-a"}, {{"sku-c", 2, "wh-2"}}, "", 0, 42.5);
  ASSERT_OK(o);
  EXPECT_THAT(o->order_id(), StartsWith("ord-"));
  EXPECT_EQ(o->status(), "CONFIRMED");
  EXPECT_EQ(o->status_code(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_EQ(o->timestamp(), (kStart + 1'234) / 1000);  // Unix seconds, as in the seed
  EXPECT_FALSE(o->reservation_id().empty());
  EXPECT_EQ(o->hold_expires_at_ms(), kStart + 1'234 + kDefaultTtl);
  EXPECT_FALSE(o->replayed());

  // Three levels held, one status event.
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(events[i].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RESERVE);
    EXPECT_EQ(events[i].stock_changed().order_id(), o->order_id());
  }
  const auto& status = events[3];
  EXPECT_EQ(status.type(), "order.status.changed");
  EXPECT_EQ(status.key(), o->order_id());
  EXPECT_EQ(status.order_status_changed().status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_EQ(status.order_status_changed().status_name(), "CONFIRMED");
  EXPECT_EQ(status.order_status_changed().customer_id(), "cust-1");
  EXPECT_EQ(o->sequence(), status.sequence());

  auto order = core_->GetOrder(o->order_id());
  ASSERT_OK(order);
  EXPECT_EQ(order->customer_id(), "cust-1");
  EXPECT_EQ(order->status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_DOUBLE_EQ(order->total_amount(), 42.5);
  EXPECT_EQ(order->reservation_id(), o->reservation_id());
  EXPECT_EQ(order->created_at_ms(), kStart + 1'234);
  EXPECT_EQ(order->sequence(), status.sequence());
  ASSERT_EQ(order->lines_size(), 3);
  EXPECT_EQ(order->lines(0).sku(), "sku-a");
  EXPECT_EQ(order->lines(0).location(), "default");
  EXPECT_EQ(order->lines(0).quantity(), 2);  // two item_ids of sku-a: one unit each
  EXPECT_EQ(order->lines(1).sku(), "sku-b");
  EXPECT_EQ(order->lines(1).quantity(), 1);
  EXPECT_EQ(order->lines(2).sku(), "sku-c");
  EXPECT_EQ(order->lines(2).location(), "wh-2");
  EXPECT_EQ(order->lines(2).quantity(), 2);

  auto hold = core_->GetReservation(o->reservation_id());
  ASSERT_OK(hold);
  EXPECT_EQ(hold->state(), inv::RESERVATION_STATE_HELD);
  EXPECT_TRUE(hold->owned_by_order());
  EXPECT_EQ(hold->order_id(), o->order_id());
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  EXPECT_EQ(Level("sku-b").reserved(), 1);
  EXPECT_EQ(Level("sku-c", "wh-2").reserved(), 2);
  EXPECT_EQ(core::OrderStatusName(ord::ORDER_STATUS_CONFIRMED), "CONFIRMED");
}

TEST_F(CoreTest, CreateOrderWithoutStockCreatesNothing) {
  ASSERT_OK(Adjust("sku-a", 1));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(CreateOrder({"sku-a", "sku-a"}), absl::StatusCode::kFailedPrecondition,
                      "sku 'sku-a' at location 'default': requested 2, available 1"));
  auto unknown = CreateOrder({"ghost"});
  EXPECT_TRUE(IsError(unknown, absl::StatusCode::kNotFound, "sku 'ghost'"));
  EXPECT_THAT(Msg(unknown.status()), HasSubstr("items[0]"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(store_.Size(Table::kOrders), 0u);
  EXPECT_EQ(store_.Size(Table::kHolds), 0u);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
}

TEST_F(CoreTest, PayOrderCommitsHoldWithExactlyOneReceipt) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a", "sku-a"}, {}, "", 0, 19.99);
  ASSERT_OK(o);
  size_t before = EventCount();

  auto paid = Pay(o->order_id(), "psp-123");
  ASSERT_OK(paid);
  EXPECT_EQ(paid->order().status(), ord::ORDER_STATUS_PAID);
  EXPECT_EQ(paid->order().payment_reference(), "psp-123");
  EXPECT_EQ(Level("sku-a").on_hand(), 3);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(core_->GetReservation(o->reservation_id())->state(),
            inv::RESERVATION_STATE_COMMITTED);

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 3u);  // commit of one level, status PAID, receipt
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_COMMIT);
  EXPECT_EQ(events[0].stock_changed().delta_on_hand(), -2);
  EXPECT_EQ(events[1].order_status_changed().status(), ord::ORDER_STATUS_PAID);
  EXPECT_EQ(events[1].order_status_changed().previous_status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_EQ(events[2].type(), "order.receipt");
  EXPECT_EQ(events[2].key(), o->order_id());
  EXPECT_EQ(paid->sequence(), events[2].sequence());
  const auto& receipt = events[2].receipt();
  EXPECT_EQ(receipt.order_id(), o->order_id());
  EXPECT_EQ(receipt.customer_id(), "cust-1");
  EXPECT_DOUBLE_EQ(receipt.total_amount(), 19.99);
  EXPECT_EQ(receipt.payment_reference(), "psp-123");
  EXPECT_EQ(receipt.reservation_id(), o->reservation_id());
  ASSERT_EQ(receipt.lines_size(), 1);
  EXPECT_EQ(receipt.lines(0).quantity(), 2);

  EXPECT_TRUE(IsError(Pay(o->order_id()), absl::StatusCode::kFailedPrecondition,
                      "is PAID; only a CONFIRMED order can be paid"));
  int receipts = 0;
  for (const auto& e : Outbox()) receipts += e.has_receipt() ? 1 : 0;
  EXPECT_EQ(receipts, 1);
}

TEST_F(CoreTest, AdvanceOrderOneStepAtATime) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  const std::string id = o->order_id();
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_PACKING), absl::StatusCode::kFailedPrecondition,
                      "is CONFIRMED; it can move to PACKING only from PAID"));
  ASSERT_OK(Pay(id));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_DISPATCHED),
                      absl::StatusCode::kFailedPrecondition,
                      "is PAID; it can move to DISPATCHED only from PACKING"));
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_DELIVERED),
                      absl::StatusCode::kFailedPrecondition, "only from DISPATCHED"));
  EXPECT_EQ(EventCount(), before);

  auto packing = Advance(id, ord::ORDER_STATUS_PACKING);
  ASSERT_OK(packing);
  EXPECT_EQ(packing->order().status(), ord::ORDER_STATUS_PACKING);
  EXPECT_EQ(packing->order().details(), "order progressed to PACKING");
  EXPECT_TRUE(IsError(Advance(id, ord::ORDER_STATUS_PACKING), absl::StatusCode::kFailedPrecondition,
                      "is PACKING"));
  auto dispatched = Advance(id, ord::ORDER_STATUS_DISPATCHED, "truck 7");
  ASSERT_OK(dispatched);
  EXPECT_EQ(dispatched->order().details(), "truck 7");
  auto delivered = Advance(id, ord::ORDER_STATUS_DELIVERED);
  ASSERT_OK(delivered);
  EXPECT_EQ(delivered->order().status(), ord::ORDER_STATUS_DELIVERED);
  EXPECT_TRUE(core::IsTerminal(delivered->order().status()));
  EXPECT_TRUE(IsError(Cancel(id), absl::StatusCode::kFailedPrecondition, "is DELIVERED"));

  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 3u);  // one per transition
  const ord::OrderStatus expected[][2] = {
      {ord::ORDER_STATUS_PAID, ord::ORDER_STATUS_PACKING},
      {ord::ORDER_STATUS_PACKING, ord::ORDER_STATUS_DISPATCHED},
      {ord::ORDER_STATUS_DISPATCHED, ord::ORDER_STATUS_DELIVERED}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(events[i].order_status_changed().previous_status(), expected[i][0]);
    EXPECT_EQ(events[i].order_status_changed().status(), expected[i][1]);
    EXPECT_EQ(events[i].order_status_changed().status_name(),
              core::OrderStatusName(expected[i][1]));
  }
  EXPECT_EQ(events[1].order_status_changed().details(), "truck 7");
  EXPECT_EQ(core_->GetOrder(id)->status(), ord::ORDER_STATUS_DELIVERED);
  EXPECT_EQ(Level("sku-a").on_hand(), 4);
}

TEST_F(CoreTest, CancelConfirmedOrderReleasesHold) {
  ASSERT_OK(Adjust("sku-a", 5));
  ASSERT_OK(Adjust("sku-b", 5));
  auto o = CreateOrder({"sku-a", "sku-a", "sku-b"});
  ASSERT_OK(o);
  size_t before = EventCount();
  auto c = Cancel(o->order_id(), "changed mind");
  ASSERT_OK(c);
  EXPECT_EQ(c->order().status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_EQ(c->order().details(), "changed mind");
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 5);
  EXPECT_EQ(Level("sku-b").reserved(), 0);
  EXPECT_EQ(core_->GetReservation(o->reservation_id())->state(),
            inv::RESERVATION_STATE_RELEASED);
  auto events = EventsAfter(before);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RELEASE);
  EXPECT_EQ(events[1].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RELEASE);
  EXPECT_EQ(events[2].order_status_changed().status(), ord::ORDER_STATUS_CANCELLED);
  EXPECT_EQ(events[2].order_status_changed().previous_status(), ord::ORDER_STATUS_CONFIRMED);
  EXPECT_TRUE(
      IsError(Cancel(o->order_id()), absl::StatusCode::kFailedPrecondition, "is CANCELLED"));
}

TEST_F(CoreTest, CancelPaidOrPackingOrderRestocksOnHand) {
  ASSERT_OK(Adjust("sku-a", 5));
  for (bool packing : {false, true}) {
    SCOPED_TRACE(packing ? "PACKING" : "PAID");
    auto o = CreateOrder({"sku-a", "sku-a"});
    ASSERT_OK(o);
    ASSERT_OK(Pay(o->order_id()));
    if (packing) ASSERT_OK(Advance(o->order_id(), ord::ORDER_STATUS_PACKING));
    EXPECT_EQ(Level("sku-a").on_hand(), 3);
    size_t before = EventCount();

    auto c = Cancel(o->order_id());
    ASSERT_OK(c);
    EXPECT_EQ(c->order().status(), ord::ORDER_STATUS_CANCELLED);
    EXPECT_EQ(c->order().details(), "cancelled by request");
    EXPECT_EQ(Level("sku-a").on_hand(), 5);
    EXPECT_EQ(Level("sku-a").reserved(), 0);
    auto events = EventsAfter(before);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].stock_changed().cause(), ev::STOCK_CHANGE_CAUSE_RESTOCK);
    EXPECT_EQ(events[0].stock_changed().delta_on_hand(), 2);
    EXPECT_EQ(events[0].stock_changed().delta_reserved(), 0);
    EXPECT_EQ(events[0].stock_changed().order_id(), o->order_id());
    EXPECT_EQ(events[1].order_status_changed().status(), ord::ORDER_STATUS_CANCELLED);
    EXPECT_EQ(events[1].order_status_changed().previous_status(),
              packing ? ord::ORDER_STATUS_PACKING : ord::ORDER_STATUS_PAID);
  }
}

TEST_F(CoreTest, CancelDispatchedOrderIsRejected) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  ASSERT_OK(Pay(o->order_id()));
  ASSERT_OK(Advance(o->order_id(), ord::ORDER_STATUS_PACKING));
  ASSERT_OK(Advance(o->order_id(), ord::ORDER_STATUS_DISPATCHED));
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Cancel(o->order_id()), absl::StatusCode::kFailedPrecondition,
                      "is DISPATCHED; only CONFIRMED, PAID or PACKING orders can be cancelled"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").on_hand(), 4);
  EXPECT_EQ(core_->GetOrder(o->order_id())->status(), ord::ORDER_STATUS_DISPATCHED);
}

TEST_F(CoreTest, OrderHoldChangesOnlyThroughOrderService) {
  ASSERT_OK(Adjust("sku-a", 5));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  size_t before = EventCount();
  EXPECT_TRUE(IsError(Commit(o->reservation_id()), absl::StatusCode::kFailedPrecondition,
                      fmt::format("belongs to order '{}'; pay it", o->order_id())));
  EXPECT_TRUE(IsError(Release(o->reservation_id()), absl::StatusCode::kFailedPrecondition,
                      "cancel it with OrderService.CancelOrder"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").reserved(), 1);
  EXPECT_EQ(core_->GetOrder(o->order_id())->status(), ord::ORDER_STATUS_CONFIRMED);
}

TEST_F(CoreTest, UnknownOrderIsNotFound) {
  EXPECT_TRUE(IsError(Pay("ord-nope"), absl::StatusCode::kNotFound, "order 'ord-nope'"));
  EXPECT_TRUE(IsError(Advance("ord-nope", ord::ORDER_STATUS_PACKING), absl::StatusCode::kNotFound,
                      "order 'ord-nope'"));
  EXPECT_TRUE(IsError(Cancel("ord-nope"), absl::StatusCode::kNotFound, "order 'ord-nope'"));
  EXPECT_TRUE(
      IsError(core_->GetOrder("ord-nope"), absl::StatusCode::kNotFound, "order 'ord-nope'"));
}

// =========================================================================================
// Events

TEST_F(CoreTest, EventsAreGapFreeAndOnePerChange) {
  ASSERT_OK(Adjust("sku-a", 10));               // 1 event
  ASSERT_OK(Adjust("sku-b", 10));               // 1
  auto r = Reserve({{"sku-a", 1}, {"sku-b", 1}});  // 2
  ASSERT_OK(r);
  ASSERT_OK(Commit(r->reservation().reservation_id()));  // 2
  auto o = CreateOrder({"sku-a"});              // 1 + 1
  ASSERT_OK(o);
  ASSERT_OK(Pay(o->order_id()));                // 1 + 1 + 1
  ASSERT_OK(Cancel(o->order_id()));             // 1 + 1
  EXPECT_FALSE(Reserve({{"sku-a", 100}}).ok());  // 0
  ASSERT_EQ(EventCount(), 13u);

  auto events = Outbox();
  std::string store_id = StoreId();
  EXPECT_EQ(store_id.size(), 16u);
  std::map<std::string, uint64_t> last_version;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    EXPECT_EQ(e.sequence(), i + 1);
    EXPECT_EQ(e.event_id(), fmt::format("{}-{}", store_id, i + 1));
    ASSERT_NE(e.payload_case(), ev::Event::PAYLOAD_NOT_SET);
    if (e.has_stock_changed()) {
      const auto& l = e.stock_changed().level();
      EXPECT_EQ(e.type(), "inventory.stock.changed");
      EXPECT_EQ(e.key(), l.sku());
      EXPECT_EQ(l.sequence(), e.sequence());
      // A level's version grows by exactly one per event about it.
      std::string key = fmt::format("{}/{}", l.sku(), l.location());
      EXPECT_EQ(l.version(), last_version[key] + 1) << key;
      last_version[key] = l.version();
    }
  }
  auto next = store_.Get(Table::kMeta, storage::meta_keys::kNextSequence);
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ(storage::DecodeSequence(**next), 14u);
  WaitPublished(13);
  EXPECT_EQ(core_->stats().last_sequence, 13u);
  EXPECT_EQ(core_->stats().events, 13u);
}

class BatchHookTest : public CoreTest {
 protected:
  BatchHookTest() {
    options_.on_batch_committed = [this](size_t commands, size_t events, double seconds) {
      hook_commands_ += commands;
      hook_events_ += events;
      EXPECT_GE(seconds, 0.0);
    };
  }
  std::atomic<size_t> hook_commands_{0}, hook_events_{0};
};

TEST_F(BatchHookTest, OnBatchCommittedSeesEveryCommittedEvent) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 1}}));
  EXPECT_EQ(hook_commands_.load(), 2u);
  EXPECT_EQ(hook_events_.load(), 2u);
}

// =========================================================================================
// Reads

TEST_F(CoreTest, GetStockManyKeysEveryLocationAndMissing) {
  ASSERT_OK(Adjust("a", 1));
  ASSERT_OK(Adjust("a", 2, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  ASSERT_OK(Adjust("ab", 3));  // shares a prefix with "a": must not show up for "a"
  ASSERT_OK(Adjust("b", 4));

  inv::GetStockRequest req;
  auto add = [&](std::string sku, std::string loc) {
    auto* k = req.add_keys();
    k->set_sku(std::move(sku));
    k->set_location(std::move(loc));
  };
  add("a", "");
  add("b", "default");
  add("ghost", "");
  add("b", "wh-9");
  add("ab", "");
  auto resp = core_->GetStock(req);
  ASSERT_OK(resp);
  ASSERT_EQ(resp->levels_size(), 4);
  EXPECT_EQ(resp->levels(0).sku(), "a");
  EXPECT_EQ(resp->levels(0).location(), "default");
  EXPECT_EQ(resp->levels(0).on_hand(), 1);
  EXPECT_EQ(resp->levels(1).sku(), "a");
  EXPECT_EQ(resp->levels(1).location(), "wh-2");
  EXPECT_EQ(resp->levels(1).on_hand(), 2);
  EXPECT_EQ(resp->levels(2).sku(), "b");
  EXPECT_EQ(resp->levels(2).on_hand(), 4);
  EXPECT_EQ(resp->levels(3).sku(), "ab");
  EXPECT_EQ(resp->levels(3).on_hand(), 3);
  ASSERT_EQ(resp->missing_size(), 2);
  EXPECT_EQ(resp->missing(0).sku(), "ghost");
  EXPECT_EQ(resp->missing(0).location(), "");
  EXPECT_EQ(resp->missing(1).sku(), "b");
  EXPECT_EQ(resp->missing(1).location(), "wh-9");
}

// =========================================================================================
// Recovery

TEST_F(CoreTest, RecoveryRestoresLevelsHoldsAndSequence) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Adjust("sku-b", 10, inv::ADJUST_MODE_DELTA, "", "wh-2"));
  auto held = Reserve({{"sku-a", 2}, {"sku-b", 3, "wh-2"}}, "", "", 60'000);
  ASSERT_OK(held);
  auto done = Reserve({{"sku-a", 1}});
  ASSERT_OK(done);
  ASSERT_OK(Commit(done->reservation().reservation_id()));
  auto order = CreateOrder({"sku-a"});
  ASSERT_OK(order);
  auto keyed = Reserve({{"sku-a", 1}}, "", "k-1", 1'000);
  ASSERT_OK(keyed);

  const uint64_t last = EventCount();
  inv::GetStockRequest all;
  all.add_keys()->set_sku("sku-a");
  all.add_keys()->set_sku("sku-b");
  auto before = core_->GetStock(all);
  ASSERT_OK(before);
  const std::string store_id = StoreId();
  // The stored hold record is the reply's reservation (the writer keeps a plain struct and
  // rebuilds the message for both).
  auto stored_hold = core_->GetReservation(held->reservation().reservation_id());
  ASSERT_OK(stored_hold);
  EXPECT_TRUE(ProtoEq(*stored_hold, held->reservation()));

  Reopen();
  auto stats = core_->stats();
  EXPECT_EQ(stats.held_reservations, 3u);
  EXPECT_EQ(stats.stock_levels, 2u);
  EXPECT_EQ(stats.last_sequence, last);
  auto after = core_->GetStock(all);
  ASSERT_OK(after);
  EXPECT_TRUE(ProtoEq(*after, *before));

  // The recovered holds work, and the sequence continues at last + 1.
  auto c = Commit(held->reservation().reservation_id());
  ASSERT_OK(c);
  // The hold rebuilt from its record closes into the same reservation, lines and all.
  inv::Reservation expected = held->reservation();
  expected.set_state(inv::RESERVATION_STATE_COMMITTED);
  expected.set_closed_at_ms(c->reservation().closed_at_ms());
  EXPECT_TRUE(ProtoEq(c->reservation(), expected));
  EXPECT_EQ(c->reservation().lines_size(), 2);
  auto events = EventsAfter(last);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].sequence(), last + 1);
  EXPECT_EQ(events[0].event_id(), fmt::format("{}-{}", store_id, last + 1));
  EXPECT_EQ(c->sequence(), last + 2);
  EXPECT_EQ(Level("sku-b", "wh-2").on_hand(), 7);

  // Idempotency records survive; the expiry index is rebuilt; orders continue.
  auto replay = Reserve({{"sku-a", 1}}, "", "k-1", 1'000);
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed());
  EXPECT_EQ(replay->reservation().reservation_id(), keyed->reservation().reservation_id());
  clock_.Advance(1'000);
  auto swept = ExpireDue();
  ASSERT_OK(swept);
  EXPECT_EQ(swept->expired_holds, 1u);
  ASSERT_OK(Pay(order->order_id()));
  EXPECT_EQ(Level("sku-a").on_hand(), 6);  // 10 - 1 - 2 - 1
  EXPECT_EQ(Level("sku-a").reserved(), 0);

  // Nothing older than the restart is retained in memory: resuming from before it is a gap.
  Recorder rec;
  auto attach = core_->change_feed().Subscribe(&rec, 0);
  EXPECT_TRUE(attach.gap);
  core_->change_feed().Unsubscribe(&rec);
}

TEST_F(CoreTest, RecoveryRefusesABrokenInvariant) {
  ASSERT_OK(Adjust("sku-a", 10));
  core_.reset();
  // A level that claims 5 reserved units with no open hold behind them.
  inv::StockLevel bad;
  bad.set_sku("sku-a");
  bad.set_location("default");
  bad.set_on_hand(10);
  bad.set_reserved(5);
  bad.set_available(5);
  StoreRecord(Table::kStock, std::string("sku-a\0default", 13), bad.SerializeAsString());
  auto c = InventoryCore::Open(store_, clock_, options_);
  EXPECT_TRUE(IsError(c, absl::StatusCode::kDataLoss, "sku 'sku-a'"));
  check_invariants_ = false;
}

TEST_F(CoreTest, RecoveryRefusesAHoldOnALevelThatDoesNotExist) {
  ASSERT_OK(Adjust("sku-a", 10));
  core_.reset();
  // An open hold whose line names a level the stock table does not have.
  inv::Reservation orphan;
  orphan.set_reservation_id("r-orphan");
  orphan.set_state(inv::RESERVATION_STATE_HELD);
  orphan.set_expires_at_ms(clock_.NowMillis() + 60'000);
  auto* line = orphan.add_lines();
  line->set_sku("sku-gone");
  line->set_location("wh-9");
  line->set_quantity(2);
  StoreRecord(Table::kHolds, orphan.reservation_id(), orphan.SerializeAsString());
  auto c = InventoryCore::Open(store_, clock_, options_);
  EXPECT_TRUE(IsError(c, absl::StatusCode::kDataLoss, "of sku 'sku-gone' at 'wh-9'"));
  check_invariants_ = false;
}

// The writer keeps open holds as plain structs rebuilt from the records: a record that is
// not a HELD reservation under its own id must stop recovery, not become a hold.
TEST_F(CoreTest, RecoveryRefusesAHoldRecordThatIsNotAnOpenHoldUnderItsId) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 2}}, "r-1"));
  core_.reset();
  for (auto spoil : {+[](inv::Reservation& r) { r.set_state(inv::RESERVATION_STATE_RELEASED); },
                     +[](inv::Reservation& r) { r.set_reservation_id("r-other"); }}) {
    auto stored = store_.Get(Table::kHolds, "r-1");
    ASSERT_OK(stored);
    ASSERT_TRUE(stored->has_value());
    inv::Reservation record;
    ASSERT_TRUE(record.ParseFromString(**stored));
    ASSERT_EQ(record.state(), inv::RESERVATION_STATE_HELD);
    spoil(record);
    StoreRecord(Table::kHolds, "r-1", record.SerializeAsString());
    auto c = InventoryCore::Open(store_, clock_, options_);
    EXPECT_TRUE(IsError(c, absl::StatusCode::kDataLoss, "hold record 'r-1' is not a HELD"));
    // Put the good record back for the next case.
    record.set_state(inv::RESERVATION_STATE_HELD);
    record.set_reservation_id("r-1");
    StoreRecord(Table::kHolds, "r-1", record.SerializeAsString());
  }
  // Restored, the store opens again with the hold in place.
  auto c = InventoryCore::Open(store_, clock_, options_);
  ASSERT_OK(c);
  auto hold = (*c)->GetReservation("r-1");
  ASSERT_OK(hold);
  EXPECT_EQ(hold->lines(0).quantity(), 2);
  (*c)->Shutdown();
  check_invariants_ = false;
}

// =========================================================================================
// Failures, limits, shutdown

TEST_F(CoreTest, StorageCommitFailureStopsTheCore) {
  ASSERT_OK(Adjust("sku-a", 10));
  const size_t before = EventCount();
  store_.FailNextCommit(absl::InternalError("disk on fire"));
  auto r = Adjust("sku-a", 5);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kUnavailable, "storage commit failed"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("disk on fire"));
  EXPECT_EQ(core_->health().code(), absl::StatusCode::kUnavailable);

  // Every later command is refused, even though the store would accept writes again.
  EXPECT_TRUE(IsError(Adjust("sku-a", 1), absl::StatusCode::kUnavailable, "must restart"));
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 1}}), absl::StatusCode::kUnavailable, "must restart"));
  EXPECT_TRUE(IsError(ExpireDue(), absl::StatusCode::kUnavailable, "must restart"));
  EXPECT_EQ(EventCount(), before);
  EXPECT_EQ(Level("sku-a").on_hand(), 10);  // reads show the committed state

  // A restart recovers the committed state; the sequence has no gap.
  Reopen();
  EXPECT_TRUE(core_->health().ok());
  auto ok = Adjust("sku-a", 5);
  ASSERT_OK(ok);
  EXPECT_EQ(ok->level().on_hand(), 15);
  EXPECT_EQ(ok->sequence(), before + 1);
}

class NoQueueTest : public CoreTest {
 protected:
  NoQueueTest() { options_.max_queue_depth = 0; }
};

TEST_F(NoQueueTest, FullQueueIsResourceExhausted) {
  EXPECT_TRUE(IsError(Adjust("sku-a", 1), absl::StatusCode::kResourceExhausted,
                      "writer queue is full"));
  EXPECT_TRUE(IsError(ExpireDue(), absl::StatusCode::kResourceExhausted, "queue"));
  // Validation still comes first.
  EXPECT_TRUE(IsError(Adjust("", 1), absl::StatusCode::kInvalidArgument, "sku"));
  EXPECT_EQ(EventCount(), 0u);
}

TEST_F(CoreTest, ShutdownRejectsWithUnavailable) {
  ASSERT_OK(Adjust("sku-a", 1));
  EXPECT_TRUE(core_->health().ok());
  core_->Shutdown();
  EXPECT_TRUE(IsError(Adjust("sku-a", 1), absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_TRUE(IsError(CreateOrder({"sku-a"}), absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_TRUE(IsError(ExpireDue(), absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_EQ(core_->health().code(), absl::StatusCode::kUnavailable);
  core_->Shutdown();  // idempotent
  EXPECT_EQ(Level("sku-a").on_hand(), 1);  // reads still work
}

TEST_F(CoreTest, ShutdownCompletesQueuedCommands) {
  constexpr int kCalls = 300;
  Collector<inv::AdjustStockResponse> collector(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    inv::AdjustStockRequest r;
    r.set_sku("sku-a");
    r.set_mode(inv::ADJUST_MODE_DELTA);
    r.set_quantity(1);
    core_->AdjustStock(r, collector.Callback());
  }
  core_->Shutdown();
  auto results = collector.Wait();
  ASSERT_EQ(results.size(), static_cast<size_t>(kCalls));
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Level("sku-a").on_hand(), kCalls);
}

// =========================================================================================
// Change feed

TEST_F(CoreTest, ChangeFeedDeliversCommittedEventsInOrder) {
  Recorder rec;
  auto attach = core_->change_feed().Subscribe(&rec, UINT64_MAX);
  EXPECT_TRUE(attach.replay.empty());
  EXPECT_FALSE(attach.gap);
  EXPECT_EQ(core_->change_feed().listeners(), 1u);

  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 3}});
  ASSERT_OK(r);
  EXPECT_FALSE(Reserve({{"sku-a", 30}}).ok());  // failures publish nothing
  ASSERT_OK(Commit(r->reservation().reservation_id()));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  ASSERT_OK(Pay(o->order_id()));
  const size_t n = EventCount();
  ASSERT_TRUE(rec.WaitFor(n));
  core_->change_feed().Unsubscribe(&rec);

  auto got = rec.events();
  auto outbox = Outbox();
  ASSERT_EQ(got.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i]->sequence(), i + 1);
    EXPECT_TRUE(ProtoEq(*got[i], outbox[i]));
  }
  // After Unsubscribe nothing more arrives.
  ASSERT_OK(Adjust("sku-a", 1));
  WaitPublished(n + 1);
  EXPECT_EQ(rec.events().size(), n);
}

TEST_F(CoreTest, ChangeFeedKeyedListenersGetOnlyTheirKeysInOrder) {
  Recorder all, a_and_c, only_b;
  core_->change_feed().Subscribe(&all, UINT64_MAX);
  core_->change_feed().Subscribe(&a_and_c, UINT64_MAX, {"sku-c", "sku-a", "sku-a"});
  core_->change_feed().Subscribe(&only_b, UINT64_MAX, {"sku-b"});
  EXPECT_EQ(core_->change_feed().listeners(), 3u);
  for (int i = 0; i < 3; ++i) {
    for (const char* sku : {"sku-a", "sku-b", "sku-c", "sku-d"}) ASSERT_OK(Adjust(sku, i + 1));
  }
  ASSERT_TRUE(all.WaitFor(12));
  ASSERT_TRUE(a_and_c.WaitFor(6));
  ASSERT_TRUE(only_b.WaitFor(3));
  core_->change_feed().Unsubscribe(&a_and_c);
  // After Unsubscribe a keyed listener gets nothing more; the others go on.
  ASSERT_OK(Adjust("sku-a", 9));
  ASSERT_OK(Adjust("sku-b", 9));
  ASSERT_TRUE(all.WaitFor(14));
  ASSERT_TRUE(only_b.WaitFor(4));
  EXPECT_EQ(a_and_c.events().size(), 6u);
  uint64_t last = 0;
  for (const auto& e : a_and_c.events()) {
    EXPECT_TRUE(e->key() == "sku-a" || e->key() == "sku-c") << e->key();
    EXPECT_GT(e->sequence(), last);  // sequence order across its keys
    last = e->sequence();
  }
  for (const auto& e : only_b.events()) EXPECT_EQ(e->key(), "sku-b");
  EXPECT_EQ(only_b.events().size(), 4u);
  core_->change_feed().Unsubscribe(&all);
  core_->change_feed().Unsubscribe(&only_b);
  EXPECT_EQ(core_->change_feed().listeners(), 0u);
}

TEST_F(CoreTest, ChangeFeedSubscribeReplaysRetainedEvents) {
  for (int i = 0; i < 6; ++i) ASSERT_OK(Adjust("sku-a", 1));
  WaitPublished(6);
  Recorder rec, rec2, rec3;
  auto a = core_->change_feed().Subscribe(&rec, 2);
  EXPECT_FALSE(a.gap);
  EXPECT_EQ(a.last_sequence, 6u);
  EXPECT_EQ(a.oldest_retained, 1u);
  ASSERT_EQ(a.replay.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(a.replay[i]->sequence(), i + 3);
  auto b = core_->change_feed().Subscribe(&rec2, 0);
  EXPECT_FALSE(b.gap);
  EXPECT_EQ(b.replay.size(), 6u);
  auto c = core_->change_feed().Subscribe(&rec3, 6);
  EXPECT_FALSE(c.gap);
  EXPECT_TRUE(c.replay.empty());

  // Live events follow the replay with no gap and no duplicate.
  ASSERT_OK(Adjust("sku-a", 1));
  ASSERT_TRUE(rec.WaitFor(1));
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_EQ(rec.events()[0]->sequence(), 7u);
  for (auto* r : {&rec, &rec2, &rec3}) core_->change_feed().Unsubscribe(r);
}

class SmallRetentionTest : public CoreTest {
 protected:
  SmallRetentionTest() { options_.change_feed_retention = 3; }
};

TEST_F(SmallRetentionTest, GapWhenRetentionIsSmallerThanTheGap) {
  for (int i = 0; i < 6; ++i) ASSERT_OK(Adjust("sku-a", 1));
  WaitPublished(6);
  Recorder rec;
  auto gap = core_->change_feed().Subscribe(&rec, 1);
  EXPECT_TRUE(gap.gap);
  EXPECT_TRUE(gap.replay.empty());
  EXPECT_EQ(gap.oldest_retained, 4u);
  EXPECT_EQ(gap.last_sequence, 6u);
  core_->change_feed().Unsubscribe(&rec);
  EXPECT_TRUE(core_->change_feed().Subscribe(&rec, 2).gap);
  core_->change_feed().Unsubscribe(&rec);
  auto ok = core_->change_feed().Subscribe(&rec, 3);
  EXPECT_FALSE(ok.gap);
  ASSERT_EQ(ok.replay.size(), 3u);
  EXPECT_EQ(ok.replay.front()->sequence(), 4u);
  EXPECT_EQ(ok.replay.back()->sequence(), 6u);
  core_->change_feed().Unsubscribe(&rec);
  EXPECT_EQ(core_->change_feed().listeners(), 0u);
}

TEST(ChangeFeedTest, ResetStartsAfterTheCommittedSequence) {
  ChangeFeed feed(10);
  feed.Reset(41);
  Recorder rec;
  auto a = feed.Subscribe(&rec, 41);
  EXPECT_FALSE(a.gap);
  EXPECT_EQ(a.oldest_retained, 42u);
  feed.Unsubscribe(&rec);
  EXPECT_TRUE(feed.Subscribe(&rec, 40).gap);
  feed.Unsubscribe(&rec);

  auto e = std::make_shared<ev::Event>();
  e->set_sequence(42);
  feed.Publish({e});
  EXPECT_EQ(feed.last_sequence(), 42u);
  auto b = feed.Subscribe(&rec, 41);
  EXPECT_FALSE(b.gap);
  ASSERT_EQ(b.replay.size(), 1u);
  EXPECT_EQ(b.replay[0]->sequence(), 42u);
  feed.Unsubscribe(&rec);
}

}  // namespace
}  // namespace feed

namespace feed {
namespace {

// While a commit is under way, commands that arrive wait for it and then go to the store
// together: one write per commit round instead of one per command (each write is a batch
// of its own).
TEST_F(CoreTest, CommandsArrivingDuringACommitGoToTheStoreTogether) {
  ASSERT_OK(Adjust("sku-a", 1000));
  store_.SetCommitDelay(20);
  constexpr int kCallers = 16, kCallsEach = 5;
  size_t commits_before = store_.commits();
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < kCallsEach; ++i) {
        if (!Reserve({{"sku-a", 1}}).ok()) ++failures;
      }
    });
  }
  for (auto& c : callers) c.join();
  store_.SetCommitDelay(0);
  size_t commits = store_.commits() - commits_before;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Level("sku-a").reserved(), kCallers * kCallsEach);
  // Measured: 7-10 writes (a round's first caller back can find the committer free and go
  // alone, the rest gather); 20-24 when every arriving command was applied at once.
  EXPECT_LE(commits, static_cast<size_t>(kCallers * kCallsEach / 5)) << commits << " writes";
}

// Publishing to the change feed (thousands of watchers) runs on its own thread: a slow
// publication must not hold back the answers of later commands.
TEST_F(CoreTest, ASlowListenerDoesNotHoldBackAnswers) {
  auto stocked = Adjust("sku-a", 10);
  ASSERT_OK(stocked);
  WaitPublished(stocked->sequence());  // the listener below must see only the reservations
  class BlockingListener : public Recorder {
   public:
    void OnEvents(const std::vector<EventPtr>& events) override {
      {
        std::unique_lock lock(gate_mu_);
        entered_ = true;
        gate_cv_.notify_all();
        gate_cv_.wait(lock, [&] { return open_; });
      }
      Recorder::OnEvents(events);
    }
    bool WaitEntered() {
      std::unique_lock lock(gate_mu_);
      return gate_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_; });
    }
    void Open() {
      std::lock_guard lock(gate_mu_);
      open_ = true;
      gate_cv_.notify_all();
    }

   private:
    std::mutex gate_mu_;
    std::condition_variable gate_cv_;
    bool entered_ = false, open_ = false;
  } listener;
  core_->change_feed().Subscribe(&listener, UINT64_MAX);

  auto first = Reserve({{"sku-a", 1}});
  ASSERT_OK(first);
  ASSERT_TRUE(listener.WaitEntered());  // the publication of `first` is now stuck
  // Later commands are still answered (a hung answer fails the test after 10 s, not never).
  std::promise<absl::StatusOr<inv::ReserveResponse>> second;
  core_->Reserve(ReserveReq({{"sku-a", 2}}),
                 [&](absl::StatusOr<inv::ReserveResponse> r) { second.set_value(std::move(r)); });
  auto answer = second.get_future();
  bool answered = answer.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  // Its event waits for the publisher, and the stats say so (read before the listener moves).
  size_t unpublished = 0;
  if (answered) Eventually([&] { return (unpublished = core_->stats().unpublished_events) == 1; });
  listener.Open();
  ASSERT_TRUE(answered) << "the second Reserve waited for the stuck publication";
  ASSERT_OK(answer.get());
  EXPECT_EQ(unpublished, 1u);
  // Nothing is lost: both events arrive, in order, once the listener moves again.
  ASSERT_TRUE(listener.WaitFor(2));
  core_->change_feed().Unsubscribe(&listener);
  auto events = listener.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]->stock_changed().delta_reserved(), 1);
  EXPECT_EQ(events[1]->stock_changed().delta_reserved(), 2);
  EXPECT_LT(events[0]->sequence(), events[1]->sequence());
}

// Under load the writer applies batch N+1 while batch N is still being committed (with
// one command per batch, as soon as a command waits). Later batches must see what earlier,
// uncommitted batches did: an idempotency key, an order, a closed hold. Each chain below
// is queued behind a slow write, so its second command is applied while its first commits.
class OneCommandBatchTest : public CoreTest {
 protected:
  OneCommandBatchTest() { options_.max_batch_commands = 1; }
  // A command to queue the chain behind: it (or the chain's first command) is being written
  // for 30 ms while the rest of the chain is applied.
  void Pace() {
    inv::AdjustStockRequest a;
    a.set_sku("pacer");
    a.set_mode(inv::ADJUST_MODE_DELTA);
    a.set_quantity(1);
    core_->AdjustStock(a, [](absl::StatusOr<inv::AdjustStockResponse>) {});
  }
};

TEST_F(OneCommandBatchTest, BatchesAppliedWhileEarlierOnesCommitStillSeeTheirEffects) {
  ASSERT_OK(Adjust("sku-a", 100));
  store_.SetCommitDelay(30);
  inv::ReserveRequest first = ReserveReq(std::vector<L>{{"sku-a", 2}}, "", "pipeline-key", 0);
  std::promise<absl::StatusOr<inv::ReserveResponse>> p1, p2;
  std::promise<absl::StatusOr<ord::CreateOrderResponse>> p3;
  Pace();
  core_->Reserve(first, [&](absl::StatusOr<inv::ReserveResponse> r) { p1.set_value(r); });
  core_->Reserve(first, [&](absl::StatusOr<inv::ReserveResponse> r) { p2.set_value(r); });
  ord::CreateOrderRequest order;
  order.set_customer_id("c-1");
  order.add_item_ids("sku-a");
  core_->CreateOrder(order, [&](absl::StatusOr<ord::CreateOrderResponse> r) { p3.set_value(r); });
  auto r1 = p1.get_future().get();
  auto r2 = p2.get_future().get();
  auto created = p3.get_future().get();
  ASSERT_OK(r1);
  ASSERT_OK(r2);
  ASSERT_OK(created);
  EXPECT_TRUE(r2->replayed());
  EXPECT_EQ(r1->reservation().reservation_id(), r2->reservation().reservation_id());

  // Pay and advance the order in batches that overlap each other's commit.
  std::promise<absl::StatusOr<ord::OrderResponse>> paid, advanced;
  ord::PayOrderRequest pay;
  pay.set_order_id(created->order_id());
  ord::AdvanceOrderRequest advance;
  advance.set_order_id(created->order_id());
  advance.set_target(ord::ORDER_STATUS_PACKING);
  Pace();
  core_->PayOrder(pay, [&](absl::StatusOr<ord::OrderResponse> r) { paid.set_value(r); });
  core_->AdvanceOrder(advance, [&](absl::StatusOr<ord::OrderResponse> r) { advanced.set_value(r); });
  ASSERT_OK(paid.get_future().get());
  auto adv = advanced.get_future().get();
  ASSERT_OK(adv);
  EXPECT_EQ(adv->order().status(), ord::ORDER_STATUS_PACKING);

  // A hold committed in one batch is reported as COMMITTED to the next, not as unknown.
  inv::CommitRequest commit;
  commit.set_reservation_id(r1->reservation().reservation_id());
  std::promise<absl::StatusOr<inv::CommitResponse>> c1, c2;
  Pace();
  core_->Commit(commit, [&](absl::StatusOr<inv::CommitResponse> r) { c1.set_value(r); });
  core_->Commit(commit, [&](absl::StatusOr<inv::CommitResponse> r) { c2.set_value(r); });
  ASSERT_OK(c1.get_future().get());
  EXPECT_TRUE(IsError(c2.get_future().get(), absl::StatusCode::kFailedPrecondition, "COMMITTED"));
  store_.SetCommitDelay(0);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 97);
  EXPECT_EQ(Level("pacer").on_hand(), 3);
}

}  // namespace
}  // namespace feed

// The fixture of the core's unit tests (core_*_test.cc): a core over storage::MemoryStore
// and a FakeClock, with helpers for each command. The automatic sweep is disabled
// (sweep_interval_ms = 0): expiry happens only when a test calls ExpireDue.
//
// Every test ends with a check of the store's invariants (TearDown, after the core's last
// checkpoint): gap-free journal events from 1,
// event ids "<store id>-<seq>", meta next_sequence = last + 1, reserved == sum of open holds,
// available >= 0 unless backorder, and every stored level equal to the level carried by the
// event that produced it.
#pragma once

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
#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "google/protobuf/util/message_differencer.h"
#include "internal/v1/records.pb.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "storage/memory_store.h"
#include "storage/store.h"
#include "util/journal_util.h"

namespace feed::core_test {

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

inline constexpr int64_t kStart = 1'700'000'000'000;
inline constexpr int64_t kDefaultTtl = 15 * 60 * 1000;

inline std::string Msg(const absl::Status& s) {
  return std::string(s.message().data(), s.message().size());
}

inline AssertionResult IsError(const absl::Status& s, absl::StatusCode code,
                               std::string_view needle) {
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

inline AssertionResult ProtoEq(const google::protobuf::Message& a,
                               const google::protobuf::Message& b) {
  if (google::protobuf::util::MessageDifferencer::Equals(a, b)) return AssertionSuccess();
  return AssertionFailure() << "\n" << a.DebugString() << "differs from\n" << b.DebugString();
}

#define ASSERT_OK(expr)                                    \
  do {                                                     \
    const auto& _r = (expr);                               \
    ASSERT_TRUE(_r.ok()) << #expr << ": " << StatusOf(_r); \
  } while (0)

inline const absl::Status& StatusOf(const absl::Status& s) { return s; }
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
    EXPECT_TRUE(
        cv_.wait_for(lock, std::chrono::seconds(20), [&] { return results_.size() >= expected_; }));
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

  // Every event in the journal (the outbox), in order.
  std::vector<ev::Event> Outbox() { return test_util::JournalEvents(store_); }
  size_t EventCount() { return Outbox().size(); }
  // Records in `table` once everything committed is checkpointed into the tables.
  size_t StoreSize(Table table) {
    if (core_) {
      EXPECT_TRUE(core_->Checkpoint().ok());
    }
    return store_.Size(table);
  }
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

}  // namespace feed::core_test

// Concurrency: many threads fight over a little stock on a real RocksDB store (kAsync to keep
// it fast). The single writer must never oversell, and what it reports must agree with what
// it stored, also after a restart.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/inventory_core.h"
#include "fmt/format.h"
#include "inventory/v1/inventory.pb.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "util/journal_util.h"

namespace feed {
namespace {

namespace inv = ::inventory::v1;
using core::CallSync;
using core::InventoryCore;
using storage::Table;

constexpr int kThreads = 64;
constexpr int kCalls = 5000;
constexpr int64_t kUnits = 100;

std::string Msg(const absl::Status& s) {
  return std::string(s.message().data(), s.message().size());
}

class RaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/feed-race-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.sweep_interval_ms = 0;
    Open();
  }
  void TearDown() override {
    core_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Open() {
    storage::RocksDbOptions o;
    o.path = dir_;
    o.durability = storage::Durability::kAsync;
    auto store = storage::OpenRocksDbStore(o);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto c = InventoryCore::Open(*store_, clock_, options_);
    ASSERT_TRUE(c.ok()) << c.status();
    core_ = std::move(*c);
  }
  void Reopen() {
    core_.reset();
    store_.reset();
    Open();
  }

  void Stock(const std::string& sku, int64_t quantity) {
    inv::AdjustStockRequest r;
    r.set_sku(sku);
    r.set_mode(inv::ADJUST_MODE_SET);
    r.set_quantity(quantity);
    auto resp = CallSync(*core_, &InventoryCore::AdjustStock, r);
    ASSERT_TRUE(resp.ok()) << resp.status();
  }
  static inv::ReserveRequest OneUnit(const std::string& sku) {
    inv::ReserveRequest r;
    auto* l = r.add_lines();
    l->set_sku(sku);
    l->set_quantity(1);
    return r;
  }
  inv::StockLevel Level(const std::string& sku) {
    inv::GetStockRequest r;
    r.add_keys()->set_sku(sku);
    auto resp = core_->GetStock(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    if (!resp.ok() || resp->levels_size() != 1) {
      ADD_FAILURE() << "no single level for " << sku;
      return {};
    }
    return resp->levels(0);
  }
  // Records in `t` once everything committed is in the tables.
  size_t Count(Table t) {
    EXPECT_TRUE(core_->Checkpoint().ok());
    size_t n = 0;
    EXPECT_TRUE(store_
                    ->Scan(t, "", "",
                           [&](std::string_view, std::string_view) {
                             ++n;
                             return true;
                           })
                    .ok());
    return n;
  }
  std::map<std::string, int64_t> HeldPerSku() {
    EXPECT_TRUE(core_->Checkpoint().ok());
    std::map<std::string, int64_t> held;
    EXPECT_TRUE(store_
                    ->Scan(Table::kHolds, "", "",
                           [&](std::string_view, std::string_view v) {
                             inv::Reservation r;
                             EXPECT_TRUE(r.ParseFromArray(v.data(), static_cast<int>(v.size())));
                             for (const auto& l : r.lines()) held[l.sku()] += l.quantity();
                             return true;
                           })
                    .ok());
    return held;
  }

  // The 100-unit fight's verdict, shared by the two ways of making the calls.
  void CheckOversellVerdict(const std::vector<absl::StatusOr<inv::ReserveResponse>>& results) {
    ASSERT_EQ(results.size(), static_cast<size_t>(kCalls));
    std::set<std::string> ids;
    std::set<int64_t> reserved_seen;
    int ok = 0, short_of_stock = 0;
    for (const auto& r : results) {
      if (r.ok()) {
        ++ok;
        ids.insert(r->reservation().reservation_id());
        EXPECT_EQ(r->reservation().state(), inv::RESERVATION_STATE_HELD);
        ASSERT_EQ(r->levels_size(), 1);
        reserved_seen.insert(r->levels(0).reserved());
        EXPECT_EQ(r->levels(0).available(), kUnits - r->levels(0).reserved());
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
        EXPECT_NE(Msg(r.status()).find("sku 'hot'"), std::string::npos) << r.status();
        EXPECT_NE(Msg(r.status()).find("available 0"), std::string::npos) << r.status();
        ++short_of_stock;
      }
    }
    EXPECT_EQ(ok, kUnits);
    EXPECT_EQ(short_of_stock, kCalls - kUnits);
    EXPECT_EQ(ids.size(), static_cast<size_t>(kUnits));
    // The writer serialized the winners: each saw a distinct reserved count 1..100.
    ASSERT_EQ(reserved_seen.size(), static_cast<size_t>(kUnits));
    EXPECT_EQ(*reserved_seen.begin(), 1);
    EXPECT_EQ(*reserved_seen.rbegin(), kUnits);

    auto level = Level("hot");
    EXPECT_EQ(level.on_hand(), kUnits);
    EXPECT_EQ(level.reserved(), kUnits);
    EXPECT_EQ(level.available(), 0);
    EXPECT_EQ(level.version(), static_cast<uint64_t>(kUnits) + 1);
    EXPECT_EQ(core_->stats().held_reservations, static_cast<size_t>(kUnits));
    EXPECT_EQ(Count(Table::kHolds), static_cast<size_t>(kUnits));
    EXPECT_EQ(test_util::JournalEvents(*store_).size(), static_cast<size_t>(kUnits) + 1);
    for (const auto& id : ids) {
      auto r = core_->GetReservation(id);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->state(), inv::RESERVATION_STATE_HELD);
    }

    // A restart re-checks reserved == sum of open holds and finds the same state.
    Reopen();
    level = Level("hot");
    EXPECT_EQ(level.reserved(), kUnits);
    EXPECT_EQ(level.available(), 0);
    EXPECT_EQ(core_->stats().held_reservations, static_cast<size_t>(kUnits));
  }

  std::string dir_;
  core::SystemClock clock_;
  core::CoreOptions options_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<InventoryCore> core_;
};

TEST_F(RaceTest, SixtyFourThreadsFightOverOneHundredUnitsWithCallSync) {
  Stock("hot", kUnits);
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<absl::StatusOr<inv::ReserveResponse>> results;
  results.reserve(kCalls);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<absl::StatusOr<inv::ReserveResponse>> mine;
      while (next.fetch_add(1) < kCalls) {
        mine.push_back(CallSync(*core_, &InventoryCore::Reserve, OneUnit("hot")));
      }
      std::lock_guard lock(mu);
      for (auto& r : mine) results.push_back(std::move(r));
    });
  }
  for (auto& t : threads) t.join();
  CheckOversellVerdict(results);
}

TEST_F(RaceTest, SixtyFourThreadsFightOverOneHundredUnitsAsync) {
  Stock("hot", kUnits);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::StatusOr<inv::ReserveResponse>> results;
  results.reserve(kCalls);
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      // Fire without waiting: the writer's queue sees bursts from every thread at once.
      while (next.fetch_add(1) < kCalls) {
        core_->Reserve(OneUnit("hot"), [&](absl::StatusOr<inv::ReserveResponse> r) {
          std::lock_guard lock(mu);
          results.push_back(std::move(r));
          cv.notify_all();
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60),
                            [&] { return results.size() >= static_cast<size_t>(kCalls); }));
  }
  CheckOversellVerdict(results);
}

TEST_F(RaceTest, ReserveReleaseAndCommitMixKeepsReservedEqualToOpenHolds) {
  const std::vector<std::string> skus = {"mix-a", "mix-b", "mix-c"};
  for (const auto& s : skus) Stock(s, kUnits);
  constexpr int kOpsPerThread = 150;

  struct Hold {
    std::string id;
    std::map<std::string, int64_t> quantities;
  };
  std::mutex mu;
  std::vector<Hold> open;                    // still-open holds of every thread, at the end
  std::map<std::string, int64_t> committed;  // units committed per SKU
  std::map<std::string, int64_t> restocked;  // units added back after commits
  std::atomic<int> reserved_ok{0}, reserve_short{0}, released{0}, commits{0}, unexpected{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<Hold> mine;
      std::map<std::string, int64_t> my_committed, my_restocked;
      for (int op = 0; op < kOpsPerThread; ++op) {
        uint64_t dice = rng() % 100;
        if (mine.empty() || dice < 55) {
          inv::ReserveRequest r;
          Hold h;
          int lines = 1 + static_cast<int>(rng() % 2);
          for (int i = 0; i < lines; ++i) {
            auto* l = r.add_lines();
            l->set_sku(skus[rng() % skus.size()]);
            l->set_quantity(1 + static_cast<int64_t>(rng() % 3));
            h.quantities[l->sku()] += l->quantity();
          }
          auto resp = CallSync(*core_, &InventoryCore::Reserve, r);
          if (resp.ok()) {
            h.id = resp->reservation().reservation_id();
            mine.push_back(std::move(h));
            ++reserved_ok;
          } else if (resp.status().code() == absl::StatusCode::kFailedPrecondition) {
            ++reserve_short;
          } else {
            ADD_FAILURE() << resp.status();
            ++unexpected;
          }
        } else {
          size_t pick = rng() % mine.size();
          Hold h = std::move(mine[pick]);
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(pick));
          if (dice < 93) {
            inv::ReleaseRequest r;
            r.set_reservation_id(h.id);
            auto resp = CallSync(*core_, &InventoryCore::Release, r);
            if (resp.ok()) {
              ++released;
            } else {
              ADD_FAILURE() << "release of own hold " << h.id << ": " << resp.status();
              ++unexpected;
            }
          } else {
            inv::CommitRequest r;
            r.set_reservation_id(h.id);
            auto resp = CallSync(*core_, &InventoryCore::Commit, r);
            if (resp.ok()) {
              ++commits;
              // Put the sold units back so the stock stays contended to the end.
              for (const auto& [sku, q] : h.quantities) {
                inv::AdjustStockRequest a;
                a.set_sku(sku);
                a.set_mode(inv::ADJUST_MODE_DELTA);
                a.set_quantity(q);
                auto adj = CallSync(*core_, &InventoryCore::AdjustStock, a);
                if (adj.ok()) {
                  my_committed[sku] += q;
                  my_restocked[sku] += q;
                } else {
                  ADD_FAILURE() << "restock: " << adj.status();
                  ++unexpected;
                }
              }
            } else {
              ADD_FAILURE() << "commit of own hold " << h.id << ": " << resp.status();
              ++unexpected;
            }
          }
        }
      }
      std::lock_guard lock(mu);
      for (auto& h : mine) open.push_back(std::move(h));
      for (const auto& [sku, q] : my_committed) committed[sku] += q;
      for (const auto& [sku, q] : my_restocked) restocked[sku] += q;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(reserve_short.load(), 0) << "the stock was never contended";
  EXPECT_GT(released.load(), 0);
  EXPECT_GT(commits.load(), 0);
  EXPECT_FALSE(open.empty()) << "no hold left open: the final check would be trivial";

  std::map<std::string, int64_t> open_sum;
  for (const auto& h : open) {
    for (const auto& [sku, q] : h.quantities) open_sum[sku] += q;
    auto r = core_->GetReservation(h.id);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->state(), inv::RESERVATION_STATE_HELD) << h.id;
  }
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    auto held = HeldPerSku();
    for (const auto& sku : skus) {
      auto level = Level(sku);
      EXPECT_EQ(level.reserved(), open_sum[sku]) << sku;
      EXPECT_EQ(held[sku], open_sum[sku]) << sku;
      EXPECT_EQ(level.on_hand(), kUnits - committed[sku] + restocked[sku]) << sku;
      EXPECT_EQ(level.available(), level.on_hand() - level.reserved()) << sku;
      EXPECT_GE(level.available(), 0) << sku;
    }
    EXPECT_EQ(Count(Table::kHolds), open.size());
    EXPECT_EQ(core_->stats().held_reservations, open.size());
  };
  check("live");
  Reopen();
  check("after restart");
  std::printf("[ stats    ] reserves ok %d, short %d, released %d, committed %d, open %zu\n",
              reserved_ok.load(), reserve_short.load(), released.load(), commits.load(),
              open.size());
}

// The writer, the committer and the completer hand batches on: under a burst from 64
// threads every event must still reach a listener exactly once, in sequence order with no
// gap, one delivery at a time, and only after its caller has been answered.
class OrderChecker : public core::ChangeListener {
 public:
  void OnEvents(const std::vector<core::EventPtr>& events) override {
    if (inside_.fetch_add(1) != 0) overlapping_ = true;
    {
      std::lock_guard lock(mu_);
      for (const auto& e : events) {
        if (e->sequence() != last_ + 1 && last_ != 0) {
          out_of_order_.push_back(fmt::format("{} then {}", last_, e->sequence()));
        }
        last_ = e->sequence();
        ++count_;
        if (e->has_stock_changed() && !e->stock_changed().reservation_id().empty() &&
            !answered_.count(e->stock_changed().reservation_id())) {
          ++before_answer_;
        }
      }
      cv_.notify_all();
    }
    inside_.fetch_sub(1);
  }
  void Answered(const std::string& reservation_id) {
    std::lock_guard lock(mu_);
    answered_.insert(reservation_id);
  }
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return count_ >= n; });
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> inside_{0};
  std::atomic<bool> overlapping_{false};
  uint64_t last_ = 0;
  size_t count_ = 0;
  size_t before_answer_ = 0;
  std::vector<std::string> out_of_order_;
  std::set<std::string> answered_;
};

TEST_F(RaceTest, EveryEventIsPublishedOnceInOrderAfterItsCallerIsAnswered) {
  const std::vector<std::string> skus = {"ord-a", "ord-b", "ord-c", "ord-d"};
  for (const auto& s : skus) Stock(s, 1'000'000);
  // A caller hears before the feed publishes: wait for the set-up's own events to be out.
  for (int i = 0; i < 1000 && core_->change_feed().last_sequence() < skus.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(core_->change_feed().last_sequence(), skus.size());
  OrderChecker all;
  auto attach = core_->change_feed().Subscribe(&all, UINT64_MAX);
  const uint64_t first = attach.last_sequence + 1;
  std::atomic<int> next{0}, answered{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < kCalls;) {
        auto answer = [&](const absl::StatusOr<inv::ReserveResponse>& r) {
          if (r.ok()) {
            all.Answered(r->reservation().reservation_id());
          } else {
            ++failed;
          }
          ++answered;
        };
        // Bursts and waits by turns: the writer sometimes idles (writes and answers a batch
        // itself) and sometimes hands batches on, and the two must not reorder events.
        if (i % 4 == 0) {
          std::promise<void> done;
          core_->Reserve(OneUnit(skus[i % skus.size()]),
                         [&](absl::StatusOr<inv::ReserveResponse> r) {
                           answer(r);
                           done.set_value();
                         });
          done.get_future().wait();
        } else {
          core_->Reserve(OneUnit(skus[i % skus.size()]),
                         [answer](absl::StatusOr<inv::ReserveResponse> r) { answer(r); });
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(all.WaitFor(kCalls)) << all.count_ << " events of " << kCalls;
  core_->change_feed().Unsubscribe(&all);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(answered.load(), kCalls);
  EXPECT_FALSE(all.overlapping_.load()) << "two deliveries ran at once";
  std::lock_guard lock(all.mu_);
  EXPECT_TRUE(all.out_of_order_.empty())
      << all.out_of_order_.size() << " breaks, first " << all.out_of_order_.front();
  EXPECT_EQ(all.count_, static_cast<size_t>(kCalls));
  EXPECT_EQ(all.last_, first + kCalls - 1);
  EXPECT_EQ(all.before_answer_, 0u) << "events published before their caller was answered";
}

}  // namespace
}  // namespace feed

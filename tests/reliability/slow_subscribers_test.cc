// Slow and stalled subscribers against the real feed-server binary: 100 WatchStock streams
// that never read and 10 that do, while stock changes at 2,000 updates/s over 5,000 SKUs.
// Checks: the server's resident memory stays within its baseline + 64 MB, every stalled
// stream is ended with RESOURCE_EXHAUSTED, and the live readers' update lag has p99 < 200 ms.
// The memory compared is RSS less RocksDB's memtables and block cache (read from /metrics):
// those start empty, fill up to their configured bounds (96 MB by default) whatever the
// subscribers do, and would otherwise hide or fake the growth this test is about. Both
// figures are printed.
//
// SLOW_SUBSCRIBER_SECONDS sets the length (default 20; the long run is 600).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "reliability/server_process.h"

namespace feed {
namespace {

namespace inv = inventory::v1;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(SlowSubscribers, StalledReadersAreEndedAndMemoryStaysFlat) {
  const int seconds = std::getenv("SLOW_SUBSCRIBER_SECONDS")
                          ? std::atoi(std::getenv("SLOW_SUBSCRIBER_SECONDS"))
                          : 20;
  testing::ServerProcess server(FEED_SERVER_PATH,
                                {"--durability", "async", "--stream-max-queued-levels", "1000",
                                 "--stream-stall-timeout-ms", "5000"});
  ASSERT_TRUE(server.started());
  const std::string& address = server.address();
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(
      channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
  auto stub = inv::InventoryService::NewStub(channel);

  // A tenth under a sanitizer: there the 110 snapshots of 5,000 rows alone outlast the time
  // in which 1,000 levels change, and the live readers too would end as too slow.
  const int kSkus = 5000 / testing::kSlowdown;
  auto sku = [](int i) { return "slow-" + std::to_string(i); };
  for (int i = 0; i < kSkus; ++i) {
    inv::AdjustStockRequest a;
    a.set_sku(sku(i));
    a.set_mode(inv::ADJUST_MODE_SET);
    a.set_quantity(1);
    inv::AdjustStockResponse r;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->AdjustStock(&ctx, a, &r).ok());
  }

  // 100 stalled subscribers (every level, never read), each on its own connection.
  struct Stalled {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<inv::InventoryService::Stub> stub;
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<inv::StockUpdate>> reader;
  };
  std::vector<std::unique_ptr<Stalled>> stalled;
  for (int i = 0; i < 100; ++i) {
    auto s = std::make_unique<Stalled>();
    grpc::ChannelArguments ch_args;
    ch_args.SetInt("grpc.channel_id", i);  // a distinct connection each
    // A reader that never reads: without BDP probing its stream window stays at 64 KB, so
    // the server's writes back up instead of vanishing into ever larger client buffers.
    ch_args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    s->channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), ch_args);
    s->stub = inv::InventoryService::NewStub(s->channel);
    // Bounded even if the server never ended it (the check below then fails, not hangs);
    // far enough that a load phase running late (a busy machine) still drains before it.
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2 * seconds + 300));
    s->reader = s->stub->WatchStock(&s->ctx, inv::WatchStockRequest());
    stalled.push_back(std::move(s));
  }
  // 10 live readers measuring the lag from the change's commit to its arrival.
  std::mutex lag_mu;
  std::vector<int64_t> lags;
  std::vector<std::thread> live;
  std::vector<std::unique_ptr<grpc::ClientContext>> live_ctx;
  for (int i = 0; i < 10; ++i) live_ctx.push_back(std::make_unique<grpc::ClientContext>());
  for (int i = 0; i < 10; ++i) {
    live.emplace_back([&, i] {
      auto reader = stub->WatchStock(live_ctx[i].get(), inv::WatchStockRequest());
      inv::StockUpdate u;
      std::vector<int64_t> mine;
      while (reader->Read(&u)) {
        if (u.kind() == inv::StockUpdate::KIND_CHANGE)
          mine.push_back(NowMs() - u.level().updated_at_ms());
      }
      std::lock_guard lock(lag_mu);
      lags.insert(lags.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  // Resident memory outside RocksDB's bounded caches (see the top of the file).
  auto own_kb = [&server] {
    const long rocksdb_kb = server.RocksDbCachesKb();
    return rocksdb_kb < 0 ? -1 : server.RssKb() - rocksdb_kb;
  };
  const long baseline_kb = own_kb();
  const long baseline_rss_kb = server.RssKb();
  const auto baseline_gauges = server.StateGauges();
  ASSERT_GT(baseline_kb, 0) << "could not read RocksDB's gauges from /metrics";

  // 2,000 updates/s for `seconds`, paced, from 4 threads (a tenth of that under a sanitizer,
  // where the server is about ten times slower, so that live readers can still keep up).
  const int rate = 2000 / testing::kSlowdown;
  long peak_kb = baseline_kb, peak_rss_kb = baseline_rss_kb;
  bool gauges_readable = true;
  auto sample = [&] {
    const long own = own_kb();
    if (own < 0) gauges_readable = false;
    peak_kb = std::max(peak_kb, own);
    peak_rss_kb = std::max(peak_rss_kb, server.RssKb());
  };
  std::atomic<int64_t> sent{0};
  std::vector<std::thread> writers;
  const auto start = std::chrono::steady_clock::now();
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int64_t n = w;; n += 4) {
        auto due = start + std::chrono::microseconds(n * 1'000'000 / rate);
        if (due - start > std::chrono::seconds(seconds)) break;
        std::this_thread::sleep_until(due);
        inv::AdjustStockRequest a;
        a.set_sku(sku(static_cast<int>(n % kSkus)));
        a.set_mode(inv::ADJUST_MODE_DELTA);
        a.set_quantity(1);
        inv::AdjustStockResponse r;
        grpc::ClientContext ctx;
        if (stub->AdjustStock(&ctx, a, &r).ok()) ++sent;
      }
    });
  }
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    sample();
  }
  for (auto& t : writers) t.join();
  sample();
  // The server's own count of streams it ended as slow readers (live readers keep up).
  const double slow_ended = server.MetricTotal("feed_stream_slow_reader_ended_total");

  // Every stalled stream was ended by the server: draining it yields RESOURCE_EXHAUSTED.
  int exhausted = 0;
  std::map<std::string, int> other_endings;  // status code and message: what went wrong
  for (auto& s : stalled) {
    inv::StockUpdate u;
    while (s->reader->Read(&u)) {
    }
    grpc::Status st = s->reader->Finish();
    if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
    } else {
      ++other_endings[std::to_string(st.error_code()) + " " + st.error_message()];
    }
  }
  for (const auto& [ending, count] : other_endings) {
    std::printf("[ slow     ] %d stalled stream(s) ended with %s\n", count, ending.c_str());
  }
  for (auto& c : live_ctx) c->TryCancel();
  for (auto& t : live) t.join();
  // What the allocator holds (live and cached-free) after the run: tells a leak from
  // memory freed by the ended streams and kept by tcmalloc for reuse.
  const auto end_gauges = server.StateGauges();
  const int status = server.Stop();

  std::sort(lags.begin(), lags.end());
  int64_t p99 = lags.empty() ? -1 : lags[lags.size() * 99 / 100];
  std::printf(
      "[ slow     ] %d s, %lld updates sent (%.0f/s), server RSS less RocksDB caches "
      "baseline %ld MB, peak %ld MB (RSS %ld -> peak %ld MB), %d/100 stalled ended with "
      "RESOURCE_EXHAUSTED, live lag p99 %lld ms over %zu updates\n",
      seconds, static_cast<long long>(sent.load()), sent.load() / double(seconds),
      baseline_kb / 1024, peak_kb / 1024, baseline_rss_kb / 1024, peak_rss_kb / 1024, exhausted,
      static_cast<long long>(p99), lags.size());
  auto mb = [](const std::map<std::string, double>& g, const char* name) {
    auto it = g.find(name);
    return it == g.end() ? -1.0 : it->second / (1 << 20);
  };
  std::printf(
      "[ slow     ] heap allocated %.0f -> %.0f MB, allocator free pages %.0f -> %.0f MB "
      "and caches %.0f -> %.0f MB, RocksDB memtables+cache %.0f -> %.0f MB (baseline -> "
      "end); %.0f streams ended as slow readers\n",
      mb(baseline_gauges, "heap_allocated_bytes"), mb(end_gauges, "heap_allocated_bytes"),
      mb(baseline_gauges, "heap_free_bytes"), mb(end_gauges, "heap_free_bytes"),
      mb(baseline_gauges, "heap_cached_bytes"), mb(end_gauges, "heap_cached_bytes"),
      testing::ServerProcess::RocksDbCachesKb(baseline_gauges) / 1024.0,
      testing::ServerProcess::RocksDbCachesKb(end_gauges) / 1024.0, slow_ended);
  EXPECT_EQ(exhausted, 100);
  EXPECT_EQ(slow_ended, 100) << "the server's feed_stream_slow_reader_ended_total";
  ASSERT_FALSE(lags.empty());
  EXPECT_TRUE(gauges_readable) << "RocksDB's gauges could not be read during the run";
  if (testing::kCheckFigures) {
    EXPECT_GE(sent.load(), seconds * rate * 9 / 10);
    EXPECT_LE(peak_kb - baseline_kb, 64 * 1024)
        << "resident memory outside RocksDB's caches grew beyond baseline + 64 MB";
    EXPECT_LT(p99, 200);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "server exit status " << status;
}

}  // namespace
}  // namespace feed

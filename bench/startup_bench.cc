// Startup with a large store: writes N stock levels and N open holds straight into a RocksDB
// store (as the writer would have), closes it, then times opening the store and
// InventoryCore::Open (recovery: levels, holds, expiry index, invariant check) until the core
// is ready to serve.
//
// Usage: startup_bench [LEVELS] [HOLDS] [crash]   (default 1000000 1000000)
// `crash`: the store is written by a child process that exits without closing it (as a
// killed server would), so the open replays the WAL; otherwise it is closed cleanly.
// STARTUP_BENCH_DIR=path keeps the store there: a first run writes it, later runs only open
// it (to profile or repeat the open alone: `perf record -g build/bench/startup_bench`).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/inventory_core.h"
#include "events/v1/events.pb.h"
#include "storage/rocksdb_store.h"

int main(int argc, char** argv) {
  using namespace feed;  // NOLINT: a benchmark tool
  const int64_t levels = argc > 1 ? std::stoll(argv[1]) : 1'000'000;
  const int64_t holds = argc > 2 ? std::stoll(argv[2]) : 1'000'000;
  const bool crash = argc > 3 && std::string_view(argv[3]) == "crash";
  const char* kept_dir = std::getenv("STARTUP_BENCH_DIR");
  const bool keep = kept_dir != nullptr && *kept_dir != '\0';
  std::string dir =
      keep ? std::string(kept_dir)
           : (std::filesystem::temp_directory_path() / ("feed-startup-" + std::to_string(getpid())))
                 .string();
  const bool write = !(keep && std::filesystem::exists(dir));
  if (write) std::filesystem::remove_all(dir);
  storage::RocksDbOptions so;
  so.path = dir;
  so.durability = storage::Durability::kAsync;
  auto level_key = [](int64_t i) {
    std::string k = "sku-" + std::to_string(i);
    k.push_back('\0');
    k += "default";
    return k;
  };
  auto t0 = std::chrono::steady_clock::now();
  pid_t writer = 0;
  if (write && crash) {
    writer = fork();
    if (writer < 0) return 1;
  }
  if (write && writer == 0) {
    auto store = storage::OpenRocksDbStore(so);
    if (!store.ok()) return 1;
    auto group = (*store)->NewWriteGroup();
    const int64_t now_ms = core::SystemClock().NowMillis();
    for (int64_t i = 0; i < levels; ++i) {
      inventory::v1::StockLevel l;
      l.set_sku("sku-" + std::to_string(i));
      l.set_location("default");
      // Each level carries its share of the holds: hold h sits on level h % levels.
      int64_t reserved = holds / levels + (i < holds % levels ? 1 : 0);
      l.set_on_hand(1000 + reserved);
      l.set_reserved(reserved);
      l.set_available(1000);
      l.set_version(1);
      l.set_sequence(static_cast<uint64_t>(i + 1));
      group->Put(storage::Table::kStock, level_key(i), l.SerializeAsString());
      if (group->Count() >= 10000) {
        if (!(*store)->Commit(*group).ok()) return 1;
        group->Clear();
      }
    }
    for (int64_t h = 0; h < holds; ++h) {
      inventory::v1::Reservation r;
      r.set_reservation_id("hold-" + std::to_string(h));
      auto* line = r.add_lines();
      line->set_sku("sku-" + std::to_string(h % levels));
      line->set_location("default");
      line->set_quantity(1);
      r.set_state(inventory::v1::RESERVATION_STATE_HELD);
      r.set_created_at_ms(now_ms);
      r.set_expires_at_ms(now_ms + 3'600'000 + h);
      group->Put(storage::Table::kHolds, r.reservation_id(), r.SerializeAsString());
      if (group->Count() >= 10000) {
        if (!(*store)->Commit(*group).ok()) return 1;
        group->Clear();
      }
    }
    group->Put(storage::Table::kMeta, storage::meta_keys::kNextSequence,
               storage::EncodeSequence(static_cast<uint64_t>(levels + 1)));
    if (!(*store)->Commit(*group).ok()) return 1;
    if (crash) _exit(0);  // the store is not closed: its WAL is replayed at the next open
  }
  if (writer > 0) {
    int status = 0;
    if (waitpid(writer, &status, 0) != writer || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "the writer process failed\n");
      return 1;
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  double ready_s = 0;
  {
    auto t_open = std::chrono::steady_clock::now();
    so.defer_compactions = true;  // as feed-server opens it
    auto store = storage::OpenRocksDbStore(so);
    if (!store.ok()) return 1;
    const double store_open_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_open).count();
    core::SystemClock clock;
    core::CoreOptions options;
    auto core = core::InventoryCore::Open(**store, clock, options);
    if (!core.ok()) {
      std::fprintf(stderr, "open: %s\n", core.status().ToString().c_str());
      return 1;
    }
    ready_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_open).count();
    auto stats = (*core)->stats();
    std::printf(
        "startup_bench: %lld levels, %lld open holds%s: store+core ready in %.2f s "
        "(store open %.2f s; recovered %zu levels, %zu holds; %s %.1f s)\n",
        static_cast<long long>(levels), static_cast<long long>(holds),
        crash ? " after a crash" : "", ready_s, store_open_s, stats.stock_levels,
        stats.held_reservations,
        write ? "writing the store took" : "store kept from an earlier run, written in",
        std::chrono::duration<double>(t1 - t0).count());
  }
  if (!keep) std::filesystem::remove_all(dir);
  return ready_s <= 5.0 ? 0 : 3;
}

// Micro benchmarks of the core (Google Benchmark). Not part of the test run.
//
//   BM_ApplyInMemory          the whole command path (validate, queue, apply, complete) with a
//                             store that discards writes: the writer's CPU cost per reservation
//                             (counter writer_us: the feed-writer thread's CPU per reservation,
//                             steadier on a shared VM than the rate; process_us: all threads).
//   BM_CommitRocksDb/<mode>/N the full path with RocksDB in sync or async durability and N
//                             commands in flight (N concurrent callers): group commit at work.
//
// Run: build/bench/core_bench --benchmark_counters_tabular=true
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <semaphore>
#include <sstream>

#include "benchmark/benchmark.h"
#include "core/inventory_core.h"
#include "core_seed.h"
#include "storage/memory_store.h"
#include "storage/rocksdb_store.h"

namespace feed {
namespace {

// A store that accepts every commit and keeps nothing.
class NullStore : public storage::Store {
 public:
  class Group : public storage::WriteGroup {
   public:
    void Put(storage::Table, std::string_view k, std::string_view v) override {
      bytes_ += k.size() + v.size();
      ++ops_.puts;
    }
    void Delete(storage::Table, std::string_view k) override { ++ops_.deletes; }
    void DeleteRange(storage::Table, std::string_view, std::string_view) override {
      ++ops_.range_deletes;
    }
    size_t Count() const override { return ops_.puts + ops_.deletes + ops_.range_deletes; }
    size_t ByteSize() const override { return bytes_; }
    OperationCounts Operations() const override { return ops_; }
    void Clear() override {
      ops_ = {};
      bytes_ = 0;
    }

   private:
    OperationCounts ops_;
    size_t bytes_ = 0;
  };
  std::unique_ptr<storage::WriteGroup> NewWriteGroup() override {
    return std::make_unique<Group>();
  }
  absl::Status Commit(storage::WriteGroup&, storage::CommitMode) override {
    return absl::OkStatus();
  }
  std::unique_ptr<storage::ReadView> Snapshot() const override { return nullptr; }
  storage::Durability durability() const override { return storage::Durability::kAsync; }
  absl::StatusOr<std::optional<std::string>> Get(storage::Table, std::string_view) const override {
    return std::optional<std::string>();
  }
  absl::Status Scan(storage::Table, std::string_view, std::string_view,
                    const storage::ScanFn&) const override {
    return absl::OkStatus();
  }
};

constexpr int kSkus = 1000;

void Seed(core::InventoryCore& core) { bench::SeedStock(core, kSkus); }

// Keeps `window` commands in flight from one driver thread until `total` completed.
void Drive(core::InventoryCore& core, int64_t total, int window) {
  std::counting_semaphore<> slots(window);
  std::atomic<int64_t> done{0};
  std::binary_semaphore finished(0);
  for (int64_t i = 0; i < total; ++i) {
    slots.acquire();
    inventory::v1::ReserveRequest req;
    auto* line = req.add_lines();
    line->set_sku(bench::SeedSku(i % kSkus));
    line->set_quantity(1);
    core.Reserve(std::move(req), [&](absl::StatusOr<inventory::v1::ReserveResponse> r) {
      if (!r.ok()) std::abort();
      slots.release();
      if (done.fetch_add(1) + 1 == total) finished.release();
    });
  }
  finished.acquire();
}

// CPU seconds (user + system) of this process's thread named `name`, or of the whole
// process when `name` is empty.
double CpuSeconds(std::string_view name) {
  if (name.empty()) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return s(u.ru_utime) + s(u.ru_stime);
  }
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string thread;
    std::getline(comm, thread);
    if (thread != name) continue;
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // The fields after the command name (which ends with the last ')'): utime is the 12th.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int i = 1; i <= 13 && rest >> field; ++i) {
      if (i >= 12) ticks += std::stod(field);
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return 0;
}

void BM_ApplyInMemory(benchmark::State& state) {
  NullStore store;
  core::SystemClock clock;
  core::CoreOptions options;
  options.sweep_interval_ms = 0;
  auto core = core::InventoryCore::Open(store, clock, options);
  Seed(**core);
  const double writer_before = CpuSeconds("feed-writer"), process_before = CpuSeconds("");
  for (auto _ : state) Drive(**core, state.range(0), 4096);
  const double reservations = static_cast<double>(state.iterations() * state.range(0));
  state.counters["writer_us"] = (CpuSeconds("feed-writer") - writer_before) * 1e6 / reservations;
  state.counters["process_us"] = (CpuSeconds("") - process_before) * 1e6 / reservations;
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["reservations_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * state.range(0)), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ApplyInMemory)->Arg(200'000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CommitRocksDb(benchmark::State& state) {
  bool sync = state.range(0) == 1;
  int window = static_cast<int>(state.range(1));
  std::string dir =
      std::filesystem::temp_directory_path() / ("feed-bench-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  {
    storage::RocksDbOptions so;
    so.path = dir;
    so.durability = sync ? storage::Durability::kSync : storage::Durability::kAsync;
    auto store = storage::OpenRocksDbStore(so);
    core::SystemClock clock;
    core::CoreOptions options;
    options.sweep_interval_ms = 0;
    uint64_t batches_before = 0, commands_before = 0;
    {
      auto core = core::InventoryCore::Open(**store, clock, options);
      Seed(**core);
      batches_before = (*core)->stats().batches;
      commands_before = (*core)->stats().commands;
      const int64_t per_iteration = window == 1 ? (sync ? 200 : 5000) : 20'000;
      for (auto _ : state) Drive(**core, per_iteration, window);
      auto stats = (*core)->stats();
      state.SetItemsProcessed(state.iterations() * per_iteration);
      state.counters["reservations_per_s"] = benchmark::Counter(
          static_cast<double>(state.iterations() * per_iteration), benchmark::Counter::kIsRate);
      state.counters["commands_per_batch"] =
          static_cast<double>(stats.commands - commands_before) /
          static_cast<double>(std::max<uint64_t>(1, stats.batches - batches_before));
    }
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_CommitRocksDb)
    ->ArgNames({"sync", "callers"})
    ->ArgsProduct({{1, 0}, {1, 16, 256}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace
}  // namespace feed

BENCHMARK_MAIN();

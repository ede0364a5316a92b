// crash-worker DIR SEED UNITS THREADS
//
// Runs the deterministic plan of crash_plan.h against a durable (kSync) RocksDB store in DIR,
// every step with its own idempotency key, and writes "ACK <key>\n" to stdout with one
// write(2) after each step the core confirmed. The crash test SIGKILLs it at random moments
// and starts it again on the same DIR: steps already applied are replayed from their
// idempotency records, so the whole plan takes effect exactly once.
//
// Exit codes: 0 plan complete ("DONE" printed), 2 usage or open failure, 3 a step failed.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/inventory_core.h"
#include "crash_plan.h"
#include "inventory/v1/inventory.pb.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "storage/rocksdb_store.h"

namespace feed::crash {
namespace {

namespace inv = ::inventory::v1;
using core::CallSync;
using core::InventoryCore;

// One write(2) per line: lines from many threads never interleave (< PIPE_BUF), and what
// was written is in the pipe even if the process dies right after.
void WriteLine(const std::string& line) {
  std::string out = line + "\n";
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    ssize_t n = write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(4);  // the test is gone
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void Fail(const std::string& key, const absl::Status& s) {
  std::string msg = "crash-worker: step " + key + " failed: " + s.ToString() + "\n";
  (void)!write(STDERR_FILENO, msg.data(), msg.size());
  _exit(3);
}

template <class Resp>
void Check(const std::string& key, const absl::StatusOr<Resp>& r) {
  if (!r.ok()) Fail(key, r.status());
  WriteLine("ACK " + key);
}

void RunUnit(InventoryCore& core, uint64_t seed, uint64_t i) {
  Unit u = MakeUnit(seed, i);
  if (u.kind == Kind::kAdjust) {
    inv::AdjustStockRequest r;
    r.set_sku(SkuName(u.lines[0].sku));
    r.set_mode(inv::ADJUST_MODE_DELTA);
    r.set_quantity(u.lines[0].quantity);
    r.set_reason("crash test restock");
    r.set_idempotency_key(u.adjust_key());
    Check(u.adjust_key(), CallSync(core, &InventoryCore::AdjustStock, r));
    return;
  }
  inv::ReserveRequest r;
  for (const auto& l : u.lines) {
    auto* line = r.add_lines();
    line->set_sku(SkuName(l.sku));
    line->set_quantity(l.quantity);
  }
  if (u.names_its_id()) r.set_reservation_id(u.reservation_id());
  r.set_idempotency_key(u.reserve_key());
  auto reserved = CallSync(core, &InventoryCore::Reserve, r);
  Check(u.reserve_key(), reserved);
  // A retry after a crash gets the first answer again, so the same id.
  const std::string id = reserved->reservation().reservation_id();
  if (u.then == Then::kCommit) {
    inv::CommitRequest c;
    c.set_reservation_id(id);
    c.set_idempotency_key(u.commit_key());
    Check(u.commit_key(), CallSync(core, &InventoryCore::Commit, c));
  } else if (u.then == Then::kRelease) {
    inv::ReleaseRequest l;
    l.set_reservation_id(id);
    l.set_reason("crash test release");
    l.set_idempotency_key(u.release_key());
    Check(u.release_key(), CallSync(core, &InventoryCore::Release, l));
  }
}

int Main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: crash-worker DIR SEED UNITS THREADS\n");
    return 2;
  }
  const std::string dir = argv[1];
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const uint64_t units = std::strtoull(argv[3], nullptr, 10);
  const int threads = std::atoi(argv[4]);
  if (threads < 1) return 2;
  // stdout carries only ACK lines: the core's log goes to stderr.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("crash-worker"));
  spdlog::set_level(spdlog::level::warn);

  storage::RocksDbOptions so;
  so.path = dir;
  // CRASH_DURABILITY=async is the negative control of the power-loss mode: acknowledged
  // steps must then go missing, which shows the simulation bites.
  const char* durability = std::getenv("CRASH_DURABILITY");
  so.durability = durability && std::string(durability) == "async" ? storage::Durability::kAsync
                                                                   : storage::Durability::kSync;
  // Power-loss mode: unsynced writes live only in this process and die with SIGKILL.
  so.simulate_power_loss = std::getenv("CRASH_POWER_LOSS") != nullptr;
  auto store = storage::OpenRocksDbStore(so);
  if (!store.ok()) {
    std::fprintf(stderr, "crash-worker: open store: %s\n", store.status().ToString().c_str());
    return 2;
  }
  core::SystemClock clock;
  core::CoreOptions options;
  options.sweep_interval_ms = 0;                         // no expiry during the test
  options.default_hold_ttl_ms = 7LL * 24 * 3600 * 1000;  // holds outlive the test
  auto core = InventoryCore::Open(**store, clock, options);
  if (!core.ok()) {
    std::fprintf(stderr, "crash-worker: open core: %s\n", core.status().ToString().c_str());
    return 2;
  }

  // Setup independent of the units: a large initial stock per SKU under a fixed key.
  for (int s = 0; s < kSkus; ++s) {
    inv::AdjustStockRequest r;
    r.set_sku(SkuName(s));
    r.set_mode(inv::ADJUST_MODE_DELTA);
    r.set_quantity(kInitialOnHand);
    r.set_reason("crash test initial stock");
    r.set_idempotency_key(InitKey(s));
    Check(InitKey(s), CallSync(**core, &InventoryCore::AdjustStock, r));
  }

  std::atomic<uint64_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (uint64_t i = next.fetch_add(1); i < units; i = next.fetch_add(1)) {
        RunUnit(**core, seed, i);
      }
    });
  }
  for (auto& t : pool) t.join();
  (*core)->Shutdown();
  core->reset();
  store->reset();
  WriteLine("DONE");
  return 0;
}

}  // namespace
}  // namespace feed::crash

int main(int argc, char** argv) { return feed::crash::Main(argc, argv); }

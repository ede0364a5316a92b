// What a cluster takeover costs in recovery, with and without standby checkpoints: a core on
// a RocksDB store (the owner) makes N reservations and commits half of them, with no
// checkpoint of its own in between; its journal entries are copied into two standby stores,
// as a standby stores them from the shard log. One is then checkpointed
// (core::CheckpointJournal, what a standby does every checkpoint interval), the other not.
// Prints the time InventoryCore::Open takes on each (the takeover's recovery) and what the
// checkpoint itself took.
//
// Usage: takeover_bench [RESERVATIONS]   (default 200000)
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <semaphore>
#include <string>

#include "core/inventory_core.h"
#include "core/journal_checkpoint.h"
#include "core_seed.h"
#include "storage/rocksdb_store.h"

namespace {

using namespace feed;  // NOLINT: a benchmark tool
using Clock = std::chrono::steady_clock;

constexpr int kSkus = 10'000;

double Ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

std::unique_ptr<storage::Store> Open(const std::filesystem::path& dir) {
  storage::RocksDbOptions so;
  so.path = dir.string();
  so.durability = storage::Durability::kAsync;
  auto store = storage::OpenRocksDbStore(so);
  if (!store.ok()) {
    std::fprintf(stderr, "takeover_bench: %s\n", store.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*store);
}

// N reservations, every other one committed, 256 in flight.
void Load(core::InventoryCore& core, int64_t reservations) {
  bench::SeedStock(core, kSkus);
  std::counting_semaphore<> slots(256);
  std::atomic<int64_t> done{0};
  std::binary_semaphore finished(0);
  for (int64_t i = 0; i < reservations; ++i) {
    slots.acquire();
    inventory::v1::ReserveRequest req;
    auto* line = req.add_lines();
    line->set_sku(bench::SeedSku(i % kSkus));
    line->set_quantity(1);
    const bool commit = i % 2 == 0;
    core.Reserve(std::move(req), [&, commit](absl::StatusOr<inventory::v1::ReserveResponse> r) {
      if (!r.ok()) std::abort();
      auto finish = [&] {
        slots.release();
        if (done.fetch_add(1) + 1 == reservations) finished.release();
      };
      if (!commit) return finish();
      inventory::v1::CommitRequest c;
      c.set_reservation_id(r->reservation().reservation_id());
      core.Commit(std::move(c), [finish](absl::StatusOr<inventory::v1::CommitResponse> cr) {
        if (!cr.ok()) std::abort();
        finish();
      });
    });
  }
  finished.acquire();
}

// The owner's journal entries into `into`, as a standby stores them.
size_t CopyJournal(const storage::Store& from, storage::Store& into) {
  size_t entries = 0;
  auto group = into.NewWriteGroup();
  auto flush = [&] {
    if (!into.Commit(*group, storage::CommitMode::kNoSync).ok()) std::abort();
    group->Clear();
  };
  (void)from.Scan(storage::Table::kJournal, "", "", [&](std::string_view k, std::string_view v) {
    group->Put(storage::Table::kJournal, k, v);
    if (++entries % 1024 == 0) flush();
    return true;
  });
  flush();
  return entries;
}

double TimeOpen(storage::Store& store, const core::CoreOptions& options) {
  core::SystemClock clock;
  const auto t = Clock::now();
  auto core = core::InventoryCore::Open(store, clock, options);
  const double ms = Ms(t);
  if (!core.ok()) {
    std::fprintf(stderr, "takeover_bench: %s\n", core.status().ToString().c_str());
    std::exit(1);
  }
  (*core)->Shutdown();
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t reservations = argc > 1 ? std::stoll(argv[1]) : 200'000;
  const auto root =
      std::filesystem::temp_directory_path() / ("feed-takeover-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  core::CoreOptions options;
  options.checkpoint_interval_ms = 3'600'000;
  options.checkpoint_bytes = SIZE_MAX;
  options.sweep_interval_ms = 0;
  core::SystemClock clock;
  auto owner_store = Open(root / "owner");
  {
    auto owner = core::InventoryCore::Open(*owner_store, clock, options);
    if (!owner.ok()) return 1;
    const auto t = Clock::now();
    Load(**owner, reservations);
    std::printf("owner: %lld reservations (half committed) in %.0f ms\n",
                static_cast<long long>(reservations), Ms(t));
    // Its shutdown checkpoints the owner's own tables; the copies below see the journal only.
  }
  auto replaying = Open(root / "standby-journal-only");
  auto checkpointed = Open(root / "standby-checkpointed");
  const size_t entries = CopyJournal(*owner_store, *replaying);
  CopyJournal(*owner_store, *checkpointed);
  owner_store.reset();

  auto t = Clock::now();
  size_t folded = 0, records = 0, rounds = 0;
  for (;;) {
    auto round = core::CheckpointJournal(*checkpointed, 8u << 20);
    if (!round.ok()) return 1;
    folded += round->entries;
    records += round->records;
    ++rounds;
    if (!round->more) break;
  }
  const double checkpoint_ms = Ms(t);
  const double replay_ms = TimeOpen(*replaying, options);
  const double folded_ms = TimeOpen(*checkpointed, options);
  std::printf(
      "standby copy: %zu journal entries\n"
      "standby checkpoint: %zu entries, %zu records in %zu rounds of 8 MB, %.0f ms\n"
      "takeover recovery without standby checkpoints: %.0f ms\n"
      "takeover recovery after a standby checkpoint: %.0f ms (%.1fx faster)\n",
      entries, folded, records, rounds, checkpoint_ms, replay_ms, folded_ms,
      replay_ms / std::max(folded_ms, 0.001));
  replaying.reset();
  checkpointed.reset();
  std::filesystem::remove_all(root);
  return 0;
}

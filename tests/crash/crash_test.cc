// The crash test: start crash-worker on a data directory, SIGKILL it after a random 30-400 ms,
// check the store, start it again on the same directory, ... then let it finish and compare
// the final state with the model of crash_plan.h. The kill comes 30-400 ms after the start
// (even cycles) or after the worker's first step that no earlier run acknowledged (odd cycles).
//
// After every kill: every ACKed step has its idempotency record (no acknowledged change is
// lost); the core opens (it verifies reserved == sum of open holds and available >= 0); the
// outbox holds exactly the sequences 1..next_sequence-1, each a parseable event with that
// sequence (no gap, nothing invented). At the end: stock levels equal the model and the
// number of events equals the model's count exactly (every step took effect exactly once).
//
// Environment: CRASH_CYCLES (default 20), CRASH_SEED (default random, printed),
// CRASH_UNITS (default 30000), CRASH_THREADS (default 16).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/inventory_core.h"
#include "crash_plan.h"
#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "internal/v1/records.pb.h"
#include "inventory/v1/inventory.pb.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "util/journal_util.h"

#ifndef CRASH_WORKER_PATH
#error "CRASH_WORKER_PATH must name the crash-worker binary"
#endif

extern char** environ;

namespace feed::crash {
namespace {

namespace inv = ::inventory::v1;
using storage::Table;

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

struct WorkerRun {
  std::vector<std::string> acked;   // keys, in the order the worker wrote them
  bool done = false;                // the worker printed DONE
  bool killed = false;              // we sent SIGKILL
  bool timed_out = false;           // killed by the safety timeout, not by the plan
  bool reached_new_ground = false;  // it acknowledged a step never acknowledged before
  int status = 0;                   // from waitpid
  double seconds = 0;
};

enum class KillTimer {
  kNone,           // let the worker finish
  kFromStart,      // count from the spawn: lands in RocksDB recovery, replay or new work
  kFromNewGround,  // count from the first step not acknowledged in an earlier run
};

// Starts the worker and reads its ACK lines. With a kill timer, SIGKILLs it kill_after_ms
// after the timer starts. Any run is killed (and flagged) after timeout_ms.
WorkerRun RunWorker(const std::string& dir, uint64_t seed, uint64_t units, uint64_t threads,
                    KillTimer timer, int kill_after_ms, int timeout_ms,
                    const std::set<std::string>& acked_before) {
  WorkerRun run;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return run;
  }
  std::string exe = CRASH_WORKER_PATH;
  std::string a_seed = std::to_string(seed), a_units = std::to_string(units),
              a_threads = std::to_string(threads);
  std::string a_dir = dir;
  char* argv[] = {exe.data(),     a_dir.data(),     a_seed.data(),
                  a_units.data(), a_threads.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = 0;
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    ADD_FAILURE() << "posix_spawn " << exe << ": " << std::strerror(rc);
    return run;
  }

  const auto safety = started + std::chrono::milliseconds(timeout_ms);
  std::optional<Clock::time_point> kill_at;
  if (timer == KillTimer::kFromStart) kill_at = started + std::chrono::milliseconds(kill_after_ms);
  std::string pending;  // bytes after the last complete line
  auto take_lines = [&] {
    size_t pos = 0;
    for (size_t nl; (nl = pending.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      std::string line = pending.substr(pos, nl - pos);
      if (line.rfind("ACK ", 0) == 0) {
        std::string key = line.substr(4);
        if (!run.reached_new_ground && !acked_before.contains(key)) {
          run.reached_new_ground = true;
          if (timer == KillTimer::kFromNewGround) {
            kill_at = Clock::now() + std::chrono::milliseconds(kill_after_ms);
          }
        }
        run.acked.push_back(std::move(key));
      } else if (line == "DONE") {
        run.done = true;
      } else {
        ADD_FAILURE() << "unexpected worker output: '" << line << "'";
      }
    }
    pending.erase(0, pos);
  };

  while (true) {
    int wait_ms = -1;
    if (!run.killed) {
      auto deadline = kill_at ? std::min(*kill_at, safety) : safety;
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        kill(pid, SIGKILL);
        run.killed = true;
        run.timed_out = !kill_at || *kill_at > safety;
      } else {
        wait_ms = static_cast<int>(left);
      }
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;  // a deadline passed: loop to kill
    char chunk[65536];
    ssize_t got = read(fds[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // every copy of the write end is closed: the worker is gone
    pending.append(chunk, static_cast<size_t>(got));
    take_lines();
  }
  close(fds[0]);
  waitpid(pid, &run.status, 0);
  run.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  // A line is written with one write(2): a torn last line would mean it was written in pieces.
  EXPECT_TRUE(pending.empty()) << "torn last line: '" << pending << "'";
  return run;
}

std::string MethodForKey(const std::string& key) {
  if (key.rfind("init-", 0) == 0 || key.rfind("a-", 0) == 0) return "inventory.v1.AdjustStock";
  if (key.rfind("r-", 0) == 0) return "inventory.v1.Reserve";
  if (key.rfind("c-", 0) == 0) return "inventory.v1.Commit";
  if (key.rfind("l-", 0) == 0) return "inventory.v1.Release";
  return "?";
}

struct State {
  uint64_t events = 0;
  uint64_t idempotency_records = 0;
  uint64_t keys_in_reservations = 0;  // Reserves' keys kept in their reservations
  uint64_t holds = 0;
  uint64_t reservations = 0;
  std::vector<inv::StockLevel> levels;
};

// Opens the store as a restarted server would (the core recovers: the tables as of the last
// checkpoint, then the journal after it, written into the tables at once) and checks the crash
// invariants on what it sees.
State Verify(const std::string& dir, const std::set<std::string>& acked) {
  State state;
  storage::RocksDbOptions so;
  so.path = dir;
  auto opened = storage::OpenRocksDbStore(so);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (!opened.ok()) return state;
  storage::Store& store = **opened;

  // 1. The core recovers (reserved == sum of open holds, available >= 0: Open checks them).
  core::SystemClock clock;
  core::CoreOptions options;
  options.sweep_interval_ms = 0;
  auto core = core::InventoryCore::Open(store, clock, options);
  EXPECT_TRUE(core.ok()) << core.status();
  if (!core.ok()) return state;
  EXPECT_TRUE((*core)->Checkpoint().ok());
  const core::CoreStats stats = (*core)->stats();

  // 2. No acknowledged step is lost: its key's record is in the idempotency table, or (a
  // Reserve's) in the reservation it made.
  std::map<std::string, std::string> kept_in_reservations;  // key -> method
  for (Table t : {Table::kHolds, Table::kReservations}) {
    EXPECT_TRUE(
        store
            .Scan(t, "", "",
                  [&](std::string_view, std::string_view value) {
                    internal::v1::ReservationKeyRecord kept;
                    EXPECT_TRUE(kept.ParseFromArray(value.data(), static_cast<int>(value.size())));
                    if (!kept.idempotency_key().empty()) {
                      kept_in_reservations[kept.idempotency_key()] = kept.reserved_with().method();
                    }
                    return true;
                  })
            .ok());
  }
  size_t missing = 0;
  for (const auto& key : acked) {
    if (auto it = kept_in_reservations.find(key); it != kept_in_reservations.end()) {
      EXPECT_EQ(it->second, MethodForKey(key)) << key;
      continue;
    }
    auto v = store.Get(Table::kIdempotency, key);
    EXPECT_TRUE(v.ok()) << v.status();
    if (!v.ok() || !v->has_value()) {
      if (++missing <= 5) ADD_FAILURE() << "ACKed step '" << key << "' has no idempotency record";
      continue;
    }
    int64_t created = 0;
    std::string_view payload;
    internal::v1::IdempotencyRecord record;
    EXPECT_TRUE(storage::DecodeTimestamped(**v, &created, &payload));
    EXPECT_TRUE(record.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
    EXPECT_EQ(record.method(), MethodForKey(key)) << key;
  }
  EXPECT_EQ(missing, 0u) << "acknowledged steps lost";
  state.keys_in_reservations = kept_in_reservations.size();

  // 3. The journal's events are exactly 1..last, gap-free, with their ids.
  std::string store_id;
  auto id = store.Get(Table::kMeta, storage::meta_keys::kStoreId);
  if (id.ok() && id->has_value()) store_id = **id;
  uint64_t expect_seq = 1;
  size_t bad = 0;
  for (const auto& e : test_util::JournalEvents(store)) {
    if (e.sequence() != expect_seq || e.event_id() != fmt::format("{}-{}", store_id, expect_seq)) {
      if (++bad <= 5) {
        ADD_FAILURE() << "journal event #" << expect_seq << ": sequence " << e.sequence() << ", id "
                      << e.event_id();
      }
    }
    ++expect_seq;
  }
  EXPECT_EQ(bad, 0u) << "the journal has gaps or bad events";
  state.events = expect_seq - 1;
  EXPECT_EQ(stats.last_sequence, state.events);
  auto next = store.Get(Table::kMeta, storage::meta_keys::kNextSequence);
  EXPECT_TRUE(next.ok());
  if (next.ok() && next->has_value()) {
    EXPECT_EQ(storage::DecodeSequence(**next), state.events + 1) << "next_sequence vs journal";
  } else {
    EXPECT_EQ(state.events, 0u) << "events without next_sequence";
  }

  auto count = [&](Table t) {
    uint64_t n = 0;
    EXPECT_TRUE(store
                    .Scan(t, "", "",
                          [&](std::string_view, std::string_view) {
                            ++n;
                            return true;
                          })
                    .ok());
    return n;
  };
  state.idempotency_records = count(Table::kIdempotency);
  state.holds = count(Table::kHolds);
  state.reservations = count(Table::kReservations);
  EXPECT_EQ(stats.held_reservations, state.holds);

  // 4. Reads agree.
  inv::GetStockRequest req;
  for (int i = 0; i < kSkus; ++i) req.add_keys()->set_sku(SkuName(i));
  auto levels = (*core)->GetStock(req);
  EXPECT_TRUE(levels.ok()) << levels.status();
  if (levels.ok()) {
    for (const auto& l : levels->levels()) {
      EXPECT_GE(l.available(), 0) << l.sku();
      state.levels.push_back(l);
    }
  }
  (*core)->Shutdown();
  return state;
}

void RunCrashCycles(uint64_t default_cycles) {
  const uint64_t cycles = EnvOr("CRASH_CYCLES", default_cycles);
  const uint64_t seed = EnvOr("CRASH_SEED", std::random_device{}() | 1);
  const uint64_t units = EnvOr("CRASH_UNITS", 30000);
  const uint64_t threads = EnvOr("CRASH_THREADS", 16);
  std::printf(
      "[ crash    ] seed %llu, %llu units, %llu threads, %llu cycles "
      "(rerun with CRASH_SEED=%llu)\n",
      static_cast<unsigned long long>(seed), static_cast<unsigned long long>(units),
      static_cast<unsigned long long>(threads), static_cast<unsigned long long>(cycles),
      static_cast<unsigned long long>(seed));

  char tmpl[] = "/tmp/feed-crash-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};

  std::mt19937_64 rng(seed);
  std::set<std::string> acked;
  uint64_t ack_lines = 0, kills = 0, finished_early = 0, new_ground_kills = 0;
  for (uint64_t c = 0; c < cycles; ++c) {
    int kill_after = 30 + static_cast<int>(rng() % 371);
    // Even cycles: the clock starts at the spawn, so the kill may land in RocksDB's recovery,
    // in the replay of done steps or in new work. Odd cycles: it starts at the first step
    // never acknowledged before, so the kill lands among new writes and fsyncs.
    KillTimer timer = c % 2 == 0 ? KillTimer::kFromStart : KillTimer::kFromNewGround;
    WorkerRun run = RunWorker(dir, seed, units, threads, timer, kill_after, 60'000, acked);
    ASSERT_FALSE(run.timed_out) << "cycle " << c << ": the worker hung";
    ack_lines += run.acked.size();
    acked.insert(run.acked.begin(), run.acked.end());
    if (WIFSIGNALED(run.status)) {
      ASSERT_EQ(WTERMSIG(run.status), SIGKILL);
      ++kills;
      if (timer == KillTimer::kFromNewGround) ++new_ground_kills;
    } else {
      // It may finish the whole plan before the kill; anything else is a failure.
      ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0 && run.done)
          << "worker exited with status " << run.status << " in cycle " << c;
      ++finished_early;
    }
    State st = Verify(dir, acked);
    if (::testing::Test::HasFailure()) {
      FAIL() << "invariants broken after cycle " << c << " (killed after " << kill_after
             << " ms; seed " << seed << ")";
    }
    std::printf(
        "[ crash    ] cycle %2llu: %s %3d ms %-14s %6zu ACKs this run, %6zu keys "
        "acked so far, %6llu events\n",
        static_cast<unsigned long long>(c), run.killed ? "killed" : "ran", kill_after,
        timer == KillTimer::kFromStart ? "after start," : "after new work,", run.acked.size(),
        acked.size(), static_cast<unsigned long long>(st.events));
  }

  // Run to completion: every unit, replayed or new, must succeed.
  WorkerRun last = RunWorker(dir, seed, units, threads, KillTimer::kNone, 0, 120'000, acked);
  ASSERT_FALSE(last.killed) << "the final run did not finish in time";
  ASSERT_TRUE(WIFEXITED(last.status) && WEXITSTATUS(last.status) == 0)
      << "final run exited with status " << last.status;
  ASSERT_TRUE(last.done);
  ack_lines += last.acked.size();
  acked.insert(last.acked.begin(), last.acked.end());
  State st = Verify(dir, acked);

  // The model: what exactly-once application of the whole plan must produce.
  Expected model = Model(seed, units);
  std::set<std::string> plan_keys;
  for (int s = 0; s < kSkus; ++s) plan_keys.insert(InitKey(s));
  for (uint64_t i = 0; i < units; ++i) {
    Unit u = MakeUnit(seed, i);
    if (u.kind == Kind::kAdjust) {
      plan_keys.insert(u.adjust_key());
    } else {
      plan_keys.insert(u.reserve_key());
      if (u.then == Then::kCommit) plan_keys.insert(u.commit_key());
      if (u.then == Then::kRelease) plan_keys.insert(u.release_key());
    }
  }
  EXPECT_EQ(acked, plan_keys) << "the final run must acknowledge every step of the plan";
  EXPECT_EQ(last.acked.size(), plan_keys.size()) << "each step acknowledged once per run";

  ASSERT_EQ(st.levels.size(), static_cast<size_t>(kSkus));
  for (const auto& l : st.levels) {
    int sku = std::atoi(l.sku().c_str() + 4);
    EXPECT_EQ(l.on_hand(), model.on_hand[sku]) << l.sku();
    EXPECT_EQ(l.reserved(), model.reserved[sku]) << l.sku();
  }
  EXPECT_EQ(st.events, model.events) << "events must match the plan exactly (exactly once)";
  EXPECT_EQ(st.idempotency_records + st.keys_in_reservations, model.idempotency_keys);
  EXPECT_GT(st.keys_in_reservations, 0u) << "no Reserve kept its key in its reservation";
  EXPECT_EQ(st.holds, model.open_holds);
  EXPECT_EQ(st.reservations, model.closed_reservations);

  std::printf(
      "[ crash    ] %llu cycles (%llu killed, %llu of them amid new work; %llu finished "
      "before the kill), %llu ACK lines, %zu distinct steps, %llu events (model %llu); "
      "final run %.2f s\n",
      static_cast<unsigned long long>(cycles), static_cast<unsigned long long>(kills),
      static_cast<unsigned long long>(new_ground_kills),
      static_cast<unsigned long long>(finished_early), static_cast<unsigned long long>(ack_lines),
      acked.size(), static_cast<unsigned long long>(st.events),
      static_cast<unsigned long long>(model.events), last.seconds);
}

TEST(CrashTest, KilledWorkerNeverLosesOrDuplicatesAStep) {
  unsetenv("CRASH_POWER_LOSS");
  RunCrashCycles(20);
}

// Power loss in sync mode: the worker keeps every unsynced byte in its own memory
// (RocksDbOptions::simulate_power_loss), so SIGKILL drops what a power cut would drop. Sync
// mode fsyncs the WAL before any acknowledgement: no acknowledged step may be lost.
TEST(CrashTest, PowerLossInSyncModeLosesNoAcknowledgedStep) {
  setenv("CRASH_POWER_LOSS", "1", 1);
  RunCrashCycles(10);
  unsetenv("CRASH_POWER_LOSS");
}

}  // namespace
}  // namespace feed::crash

// The deterministic workload of the crash test, shared by the worker (which runs it) and the
// test (which computes the expected final state from it). Unit i depends only on (seed, i).
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace feed::crash {

inline constexpr int kSkus = 20;
// Far more than all reserves can take (units * 3 lines * 5), so no reserve ever fails for
// lack of stock; within the core's max_quantity for a single adjustment.
inline constexpr int64_t kInitialOnHand = 1'000'000;

inline std::string SkuName(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "sku-%02d", i);
  return buf;
}
inline std::string InitKey(int sku) { return "init-" + SkuName(sku); }

enum class Kind { kAdjust, kReserve };
enum class Then { kNothing, kCommit, kRelease };

struct Line {
  int sku;
  int64_t quantity;
};

struct Unit {
  uint64_t index = 0;
  Kind kind = Kind::kAdjust;
  // kAdjust: one line, +quantity on that SKU. kReserve: 1-3 lines (a SKU may repeat).
  std::vector<Line> lines;
  Then then = Then::kNothing;

  std::string adjust_key() const { return "a-" + std::to_string(index); }
  std::string reserve_key() const { return "r-" + std::to_string(index); }
  // Every other Reserve names its id; the others take the one their key derives (the
  // core's idempotency.h), read from the answer, so both ways of keeping a key are crashed.
  bool names_its_id() const { return index % 2 == 0; }
  std::string reservation_id() const { return "r-" + std::to_string(index); }
  std::string commit_key() const { return "c-" + std::to_string(index); }
  std::string release_key() const { return "l-" + std::to_string(index); }

  // Lines summed per SKU, as the core aggregates them: one level (and one event) each.
  std::map<int, int64_t> per_sku() const {
    std::map<int, int64_t> m;
    for (const auto& l : lines) m[l.sku] += l.quantity;
    return m;
  }
};

// splitmix64: spreads (seed, i) into a well-mixed 64-bit seed for the generator.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Raw generator output only (no std::*_distribution), so the plan is the same everywhere.
inline Unit MakeUnit(uint64_t seed, uint64_t i) {
  std::mt19937_64 rng(Mix(seed) ^ Mix(i + 0x5151));
  Unit u;
  u.index = i;
  if (rng() % 4 == 0) {
    u.kind = Kind::kAdjust;
    u.lines.push_back({static_cast<int>(rng() % kSkus), 1 + static_cast<int64_t>(rng() % 50)});
    return u;
  }
  u.kind = Kind::kReserve;
  int n = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < n; ++k) {
    u.lines.push_back({static_cast<int>(rng() % kSkus), 1 + static_cast<int64_t>(rng() % 5)});
  }
  uint64_t then = rng() % 10;
  u.then = then < 4 ? Then::kCommit : then < 7 ? Then::kRelease : Then::kNothing;
  return u;
}

// What the store must hold once every unit of the plan has run exactly once.
struct Expected {
  std::map<int, int64_t> on_hand;
  std::map<int, int64_t> reserved;
  uint64_t events = 0;
  uint64_t idempotency_keys = 0;
  uint64_t open_holds = 0;
  uint64_t closed_reservations = 0;
};

inline Expected Model(uint64_t seed, uint64_t units) {
  Expected e;
  for (int s = 0; s < kSkus; ++s) {
    e.on_hand[s] = kInitialOnHand;
    e.reserved[s] = 0;
  }
  e.events = kSkus;  // one adjust event per SKU's initial stock
  e.idempotency_keys = kSkus;
  for (uint64_t i = 0; i < units; ++i) {
    Unit u = MakeUnit(seed, i);
    if (u.kind == Kind::kAdjust) {
      e.on_hand[u.lines[0].sku] += u.lines[0].quantity;
      e.events += 1;
      e.idempotency_keys += 1;
      continue;
    }
    auto levels = u.per_sku();
    e.events += levels.size();  // the reserve: one event per level
    e.idempotency_keys += 1;
    switch (u.then) {
      case Then::kNothing:
        for (const auto& [sku, q] : levels) e.reserved[sku] += q;
        e.open_holds += 1;
        break;
      case Then::kCommit:
        for (const auto& [sku, q] : levels) e.on_hand[sku] -= q;
        e.events += levels.size();
        e.idempotency_keys += 1;
        e.closed_reservations += 1;
        break;
      case Then::kRelease:
        e.events += levels.size();
        e.idempotency_keys += 1;
        e.closed_reservations += 1;
        break;
    }
  }
  return e;
}

}  // namespace feed::crash

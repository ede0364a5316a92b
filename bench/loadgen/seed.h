#pragma once

#include "stats.h"

namespace feed::loadgen {

struct SeedResult {
  double seconds = 0;
  uint64_t ok = 0;
  std::array<uint64_t, kNumCodes> codes{};
};

// AdjustStock SET for the whole catalogue, --seed-concurrency calls in flight.
SeedResult Seed(Shared& sh);

}  // namespace feed::loadgen

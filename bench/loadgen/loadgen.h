// What every part of the load generator shares: the clock, the generated stubs, the
// libraries. See main.cc for what the tool does.
#pragma once

#include <absl/status/status.h>
#include <fmt/format.h>
#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "echo.grpc.pb.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"

namespace feed::loadgen {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

using bench::echo::v1::Echo;
using bench::echo::v1::EchoReply;
using bench::echo::v1::EchoRequest;
using inventory::v1::InventoryService;
using order::v1::OrderService;

inline int64_t ToUs(Clock::duration d) { return duration_cast<microseconds>(d).count(); }

inline int64_t WallNowUs() {
  return duration_cast<microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace feed::loadgen

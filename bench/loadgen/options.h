#pragma once

#include "loadgen.h"

namespace feed::loadgen {

// ------------------------------------------------------------------------------- options ----

enum class Scenario { kEcho, kReserve, kReserveCommit, kCreateOrder, kFeed, kWatch };

struct Options {
  std::string target = "127.0.0.1:50051";
  std::string scenario_name = "reserve";
  Scenario scenario = Scenario::kReserve;
  int threads = 1;
  int channels = 4;
  int concurrency = 0;  // closed loop (default 64 when no --rate)
  double rate = 0;      // open loop
  double duration_s = 10;
  double warmup_s = 2;
  double drain_s = 0;  // 0: call timeout + 1 s
  int64_t call_timeout_ms = 5000;
  int max_inflight = 10000;  // open loop, unary: outstanding calls (all threads)

  int skus = 10000;
  int hot_skus = 100;
  double hot_fraction = 0.2;
  int64_t stock = 1'000'000;
  int64_t hot_stock = 50;
  std::string sku_prefix;  // default "lg<run id>-"
  // Sent as `authorization: Bearer <token>` on every call (empty: none).
  std::string token;
  bool seed = true;
  int seed_concurrency = 128;
  int64_t ttl_ms = 0;

  int order_items = 2;
  int payload_bytes = 16;

  int streams = 4;
  int inflight = 256;
  int feed_batch = 1;  // commands per Feed message (FeedRequest.more)
  bool feed_lease = false;
  // Cluster mode: stream i serves shard i mod feed_shards (metadata feed-shard) and reserves
  // that shard's SKUs only. 0: a single node.
  int feed_shards = 0;

  int subscribers = 1000;
  std::string watch_filter = "sku";  // sku | all
  int subscriber_channels = 0;       // 0: one per 500 subscribers
  double connect_timeout_s = 15;

  int server_pid = 0;     // > 0: also report the server's CPU and the machine's (from /proc)
  uint64_t rng_seed = 0;  // 0: random
  bool json = false;
};

constexpr int kNumCodes = 17;  // OK .. UNAUTHENTICATED
inline std::string CodeName(int c) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(c));
}
inline int ClampCode(int c) {
  return c >= 0 && c < kNumCodes ? c : static_cast<int>(grpc::StatusCode::UNKNOWN);
}

// Parses and checks the command line. Returns -1 to go on, or the exit code to return with
// (usage, --help, an invalid value: said on stderr).
int ParseOptions(int argc, char** argv, Options* o);

}  // namespace feed::loadgen

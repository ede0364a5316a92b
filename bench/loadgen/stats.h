#pragma once

#include "histogram.h"
#include "options.h"

namespace feed::loadgen {

// -------------------------------------------------------------------------------- stats ----

struct Stats {
  Histogram ok_latency;        // OK results
  Histogram sold_out_latency;  // FAILED_PRECONDITION where it is a business outcome
  Histogram schedule_lag;      // open loop: actual send - intended send
  Histogram watch_lag;         // watch: receive - level.updated_at_ms (changes received in window)
  std::array<uint64_t, kNumCodes> codes{};  // measured results by code
  uint64_t warmup_calls = 0;
  uint64_t unsent = 0;      // open loop: due in the window, never sent (backlog at the end)
  uint64_t backlogged = 0;  // open loop: due in the window, sent late for lack of capacity
  std::array<uint64_t, kNumCodes> stream_end_codes{};  // streams ended other than by us
  uint64_t feed_lost = 0;       // commands outstanding on a stream that ended
  uint64_t feed_unmatched = 0;  // results with an unknown request_id
  uint64_t watch_messages = 0;
  uint64_t watch_snapshot = 0;
  uint64_t watch_changes = 0;
  uint64_t watch_changes_in_window = 0;
  uint64_t watch_conflated = 0;
  uint64_t watch_negative_lag = 0;

  void Merge(const Stats& o) {
    ok_latency.Merge(o.ok_latency);
    sold_out_latency.Merge(o.sold_out_latency);
    schedule_lag.Merge(o.schedule_lag);
    watch_lag.Merge(o.watch_lag);
    for (int i = 0; i < kNumCodes; ++i) {
      codes[i] += o.codes[i];
      stream_end_codes[i] += o.stream_end_codes[i];
    }
    warmup_calls += o.warmup_calls;
    unsent += o.unsent;
    backlogged += o.backlogged;
    feed_lost += o.feed_lost;
    feed_unmatched += o.feed_unmatched;
    watch_messages += o.watch_messages;
    watch_snapshot += o.watch_snapshot;
    watch_changes += o.watch_changes;
    watch_changes_in_window += o.watch_changes_in_window;
    watch_conflated += o.watch_conflated;
    watch_negative_lag += o.watch_negative_lag;
  }
};

// ------------------------------------------------------------------------------- shared ----

struct Shared {
  Options opt;
  bool open_loop = false;
  bool business_precondition = true;  // FAILED_PRECONDITION = sold out, not an error
  std::string run_id;
  std::vector<std::string> skus;
  // --feed-shards > 0: the indexes into `skus` of each shard's SKUs.
  std::vector<std::vector<int>> skus_of_shard;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<Echo::Stub>> echo;
  std::vector<std::unique_ptr<InventoryService::Stub>> inventory;
  std::vector<std::unique_ptr<OrderService::Stub>> orders;
  // WatchStock subscribers use channels of their own: the server allows
  // --max-concurrent-streams (default 1000) streams per connection, beyond which the client
  // would queue them.
  std::vector<std::shared_ptr<grpc::Channel>> sub_channels;
  std::vector<std::unique_ptr<InventoryService::Stub>> sub_inventory;
  uint64_t seed_sequence = 0;

  // Set once by main when the timed run starts (steady clock, ns since its epoch).
  std::atomic<int64_t> t0_ns{0};
  std::atomic<int> workers_opened{0};
  std::atomic<int> workers_done{0};
  std::atomic<int> subs_started{0};    // WatchStock calls started (client side)
  std::atomic<int> subs_connected{0};  // ... that received their first message
  std::atomic<int> subs_ended{0};      // ... that ended before we cancelled them
  std::atomic<int> feed_started{0};
};

}  // namespace feed::loadgen

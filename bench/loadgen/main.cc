// loadgen: an asynchronous (completion-queue) gRPC load generator for feed-server and for the
// echo baseline (bench/echo).
//
//   loadgen --target 127.0.0.1:50051 --scenario reserve --concurrency 64 --duration-s 10
//   loadgen --target 127.0.0.1:50051 --scenario reserve --rate 5000 --json
//   loadgen --target 127.0.0.1:50051 --scenario feed --streams 4 --inflight 256
//   loadgen --target 127.0.0.1:50051 --scenario watch --subscribers 1000 --rate 2000
//   loadgen --target 127.0.0.1:50061 --scenario echo --concurrency 64
//
// Scenarios
//   echo          unary bench.echo.v1.Echo/Echo (the machine's gRPC ceiling).
//   reserve       unary inventory.v1.InventoryService/Reserve: one line, quantity 1, a unique
//                 idempotency key per call, a SKU from the catalogue (--hot-fraction of the
//                 calls go to the --hot-skus hot SKUs, which are seeded with --hot-stock units
//                 and sell out during the run).
//   reserve-commit  a Reserve as above, then a Commit of its reservation (own idempotency
//                 key): one result per pair, timed from the Reserve's intended send to the
//                 Commit's answer (what a checkout does; the store's writes per committed
//                 reservation are measured with it).
//   create-order  unary order.v1.OrderService/CreateOrder, --order-items item_ids each.
//   feed          Reserve commands over --streams bidirectional Feed streams, at most
//                 --inflight commands outstanding per stream, results matched by request_id.
//   watch         --subscribers WatchStock streams (--watch-filter sku: one SKU each, drawn
//                 like the load's SKUs; all: every level) while the reserve load (closed or
//                 open loop, as below) produces changes; reports the delivery lag of each
//                 change: receive time minus level.updated_at_ms (same machine clock).
//
// Modes
//   closed loop   --concurrency C: C calls in flight, the next one sent as soon as one ends.
//                 (feed: --streams x --inflight commands in flight.)
//   open loop     --rate R: call k is due at t0 + k/R. Latency is measured from that intended
//                 send time, so any queueing (in the server, the network or this client) counts:
//                 no coordinated omission. When --max-inflight calls (feed: --inflight per
//                 stream) are already outstanding the due calls wait in a backlog and are sent,
//                 late, when a slot frees up; calls still unsent at the end are reported as
//                 "unsent". The scheduling delay of this client (actual - intended send time) is
//                 reported separately ("schedule_lag"; feed: until the Write of the command
//                 starts).
//
// Measurement: calls whose intended send time falls in [warmup end, end) are measured; the
// run stops issuing at the end, lets outstanding calls finish (each call has a deadline of
// --call-timeout-ms) and cancels streams at the latest --drain-s after the end. FAILED_PRECONDITION
// (sold out) is a valid business outcome for reserve/create-order/feed/watch: reported apart
// from errors, with its own latency. Latencies go to a log-linear histogram (1 us resolution
// below 2.048 ms, then 1024 sub-buckets per power of two, i.e. <= 0.1 % relative error, up to
// 60 s). Only 127.0.0.1 targets are accepted.
//
// Threads: --threads workers, each with its own completion queue polled by its own thread;
// closed loop: that thread also starts the next call when one completes. Open loop: each
// worker has a scheduler thread as well, which sleeps until the next due time and starts the
// call itself, so the CQ thread only handles completions and always blocks in the CQ with a
// long deadline. (Starting the calls on the CQ thread does not work with gRPC 1.51: a CQ whose
// queue is never empty, or AsyncNext with sub-millisecond deadlines, returns without polling
// the sockets; measured: ~2,600 sendmsg but ~10 recvmsg a second, responses piled up in the
// kernel and latency grew to seconds at 10k calls/s.) --channels channels (each its own TCP
// connection), the calls spread over them round-robin.
#include <random>
#include <thread>

#include "common/shard_hash.h"
#include "options.h"
#include "proc_sample.h"
#include "report.h"
#include "seed.h"
#include "worker.h"

using namespace feed::loadgen;  // NOLINT: the tool's own namespace

int main(int argc, char** argv) {
  Options o;
  if (int exit_code = ParseOptions(argc, argv, &o); exit_code >= 0) return exit_code;
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "loadgen: %s\n", msg.c_str());
    return 2;
  };
  std::random_device rd;
  if (o.rng_seed == 0) o.rng_seed = (static_cast<uint64_t>(rd()) << 32) | rd();

  Shared sh;
  sh.opt = o;
  sh.open_loop = o.rate > 0;
  sh.business_precondition = o.scenario != Scenario::kEcho;
  sh.run_id = fmt::format("{:06x}", std::mt19937_64(o.rng_seed)() & 0xFFFFFF);
  if (sh.opt.sku_prefix.empty()) sh.opt.sku_prefix = "lg" + sh.run_id + "-";
  const Options& opt = sh.opt;
  if (opt.scenario != Scenario::kEcho) {
    sh.skus.reserve(static_cast<size_t>(opt.skus));
    for (int i = 0; i < opt.skus; ++i)
      sh.skus.push_back(fmt::format("{}{:06d}", opt.sku_prefix, i));
    if (opt.feed_shards > 0) {
      sh.skus_of_shard.resize(static_cast<size_t>(opt.feed_shards));
      for (int i = 0; i < opt.skus; ++i) {
        const uint32_t shard =
            feed::ShardOf(sh.skus[static_cast<size_t>(i)], static_cast<uint32_t>(opt.feed_shards));
        sh.skus_of_shard[shard].push_back(i);
      }
      for (size_t shard = 0; shard < sh.skus_of_shard.size(); ++shard) {
        if (sh.skus_of_shard[shard].empty()) {
          std::fprintf(stderr, "loadgen: --feed-shards: no SKU of the %d falls on shard %zu\n",
                       opt.skus, shard);
          return 2;
        }
      }
    }
  }

  FILE* report = opt.json ? stderr : stdout;
  auto connect = [&](int id) -> std::shared_ptr<grpc::Channel> {
    grpc::ChannelArguments args;
    args.SetInt("loadgen.channel", id);  // distinct args: a connection of its own
    args.SetMaxReceiveMessageSize(64 << 20);
    auto ch = grpc::CreateCustomChannel(opt.target, grpc::InsecureChannelCredentials(), args);
    if (!ch->WaitForConnected(std::chrono::system_clock::now() +
                              duration_cast<std::chrono::system_clock::duration>(
                                  std::chrono::duration<double>(opt.connect_timeout_s)))) {
      return nullptr;
    }
    return ch;
  };
  for (int i = 0; i < opt.channels; ++i) {
    auto ch = connect(i);
    if (!ch) return fail("cannot connect to " + opt.target);
    sh.channels.push_back(ch);
    sh.echo.push_back(Echo::NewStub(ch));
    sh.inventory.push_back(InventoryService::NewStub(ch));
    sh.orders.push_back(OrderService::NewStub(ch));
  }
  if (opt.scenario == Scenario::kWatch && opt.subscribers > 0) {
    int n = opt.subscriber_channels > 0 ? opt.subscriber_channels : (opt.subscribers + 499) / 500;
    for (int i = 0; i < n; ++i) {
      auto ch = connect(opt.channels + i);
      if (!ch) return fail("cannot connect to " + opt.target);
      sh.sub_channels.push_back(ch);
      sh.sub_inventory.push_back(InventoryService::NewStub(ch));
    }
  }

  RunFigures figures;
  if (opt.scenario != Scenario::kEcho && opt.seed) {
    SeedResult r = Seed(sh);
    figures.seed = {{"skus", opt.skus},
                    {"ok", r.ok},
                    {"seconds", std::round(r.seconds * 1000) / 1000},
                    {"errors", CodesJson(r.codes, true)}};
    std::fprintf(report, "seed: %d SKUs (%d hot x %lld, rest x %lld) in %.2f s, %llu ok%s\n",
                 opt.skus, opt.hot_skus, static_cast<long long>(opt.hot_stock),
                 static_cast<long long>(opt.stock), r.seconds,
                 static_cast<unsigned long long>(r.ok),
                 r.ok == static_cast<uint64_t>(opt.skus)
                     ? ""
                     : fmt::format(", errors {}", CodesJson(r.codes, true).dump()).c_str());
    if (r.ok == 0) return fail("seeding failed: " + CodesJson(r.codes, true).dump());
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < opt.threads; ++i) workers.push_back(std::make_unique<Worker>(i, &sh));
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([p = w.get()] { p->Run(); });

  // Wait for the streams to open (watch: every subscriber has its first message).
  auto connect_start = Clock::now();
  auto connect_deadline = connect_start + duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(opt.connect_timeout_s));
  while (sh.workers_opened.load() < opt.threads) std::this_thread::sleep_for(milliseconds(1));
  if (opt.scenario == Scenario::kWatch) {
    const bool need_message = opt.watch_filter == "sku";
    while (Clock::now() < connect_deadline &&
           (need_message ? sh.subs_connected.load() : sh.subs_started.load()) +
                   sh.subs_ended.load() <
               opt.subscribers) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  } else if (opt.scenario == Scenario::kFeed) {
    while (Clock::now() < connect_deadline && sh.feed_started.load() < opt.streams) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
  figures.connect_s = std::chrono::duration<double>(Clock::now() - connect_start).count();
  figures.subs_connected_at_start = sh.subs_connected.load();
  figures.subs_started_at_start = sh.subs_started.load();

  const TimePoint t0 = Clock::now() + milliseconds(1);
  const TimePoint measure_start =
      t0 + duration_cast<Clock::duration>(std::chrono::duration<double>(opt.warmup_s));
  const TimePoint end =
      measure_start + duration_cast<Clock::duration>(std::chrono::duration<double>(opt.duration_s));
  sh.t0_ns.store(duration_cast<nanoseconds>(t0.time_since_epoch()).count());
  std::this_thread::sleep_until(measure_start);
  figures.cpu0 = SelfCpu();
  figures.proc0 = SampleProc(opt.server_pid);
  std::this_thread::sleep_until(end);
  figures.cpu1 = SelfCpu();
  figures.proc1 = SampleProc(opt.server_pid);
  figures.subs_connected_at_end = sh.subs_connected.load() - sh.subs_ended.load();

  // Bounded: the workers stop by themselves (calls have deadlines, streams are cancelled after
  // --drain-s); if one does not, give up loudly instead of hanging.
  const TimePoint give_up =
      end + duration_cast<Clock::duration>(std::chrono::duration<double>(opt.drain_s + 10));
  while (sh.workers_done.load() < opt.threads) {
    if (Clock::now() > give_up) {
      std::fprintf(stderr, "loadgen: workers did not stop %.0f s after the end; exiting\n",
                   opt.drain_s + 10);
      std::fflush(stderr);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  for (auto& t : threads) t.join();

  for (auto& w : workers) figures.total.Merge(w->stats());
  workers.clear();
  Report(sh, figures, report);
  return 0;
}

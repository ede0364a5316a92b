#include "options.h"

#include <CLI/CLI.hpp>

namespace feed::loadgen {
namespace {

bool ValidTarget(const std::string& t) {
  const std::string prefix = "127.0.0.1:";
  if (t.rfind(prefix, 0) != 0) return false;
  std::string port = t.substr(prefix.size());
  if (port.empty() || port.size() > 5) return false;
  int p = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  return ec == std::errc() && ptr == port.data() + port.size() && p > 0 && p <= 65535;
}

}  // namespace

int ParseOptions(int argc, char** argv, Options* options) {
  Options& o = *options;
  CLI::App app{"loadgen: async gRPC load generator for feed-server and the echo baseline"};
  app.add_option("--target", o.target, "server address, 127.0.0.1:PORT only")
      ->capture_default_str();
  app.add_option("--token", o.token, "bearer token sent on every call (a server with auth)")
      ->envname("LOADGEN_TOKEN");
  app.add_option("--scenario", o.scenario_name,
                 "echo | reserve | reserve-commit | create-order | feed | watch")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "completion queues (one polling thread each)")
      ->capture_default_str();
  app.add_option("--channels", o.channels, "gRPC channels (TCP connections)")
      ->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "closed loop: calls in flight (default 64)");
  app.add_option("--rate", o.rate, "open loop: calls per second (intended send times)");
  app.add_option("--duration-s", o.duration_s, "measured seconds")->capture_default_str();
  app.add_option("--warmup-s", o.warmup_s, "warm-up seconds (not measured)")->capture_default_str();
  app.add_option("--drain-s", o.drain_s,
                 "after the end, streams are cancelled after this long "
                 "(default: call timeout + 1 s)");
  app.add_option("--call-timeout-ms", o.call_timeout_ms, "deadline of each unary call")
      ->capture_default_str();
  app.add_option("--max-inflight", o.max_inflight, "open loop: most unary calls outstanding")
      ->capture_default_str();
  app.add_option("--skus", o.skus, "catalogue size")->capture_default_str();
  app.add_option("--hot-skus", o.hot_skus, "hot SKUs (part of the catalogue)")
      ->capture_default_str();
  app.add_option("--hot-fraction", o.hot_fraction, "share of the calls that go to a hot SKU")
      ->capture_default_str();
  app.add_option("--stock", o.stock, "seeded on_hand of a catalogue SKU")->capture_default_str();
  app.add_option("--hot-stock", o.hot_stock, "seeded on_hand of a hot SKU (they sell out)")
      ->capture_default_str();
  app.add_option("--sku-prefix", o.sku_prefix, "SKU names: PREFIX000123 (default: lg<run id>-)");
  app.add_option("--seed", o.seed, "seed stock with AdjustStock SET before the run")
      ->capture_default_str();
  app.add_option("--seed-concurrency", o.seed_concurrency, "AdjustStock calls in flight")
      ->capture_default_str();
  app.add_option("--ttl-ms", o.ttl_ms, "hold TTL (0: server default)")->capture_default_str();
  app.add_option("--order-items", o.order_items, "create-order: item_ids per order")
      ->capture_default_str();
  app.add_option("--payload-bytes", o.payload_bytes, "echo: request value size")
      ->capture_default_str();
  app.add_option("--streams", o.streams, "feed: Feed streams")->capture_default_str();
  app.add_option("--inflight", o.inflight, "feed: commands outstanding per stream")
      ->capture_default_str();
  app.add_option("--feed-batch", o.feed_batch,
                 "feed: at most this many commands per message (FeedRequest.more)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--feed-lease", o.feed_lease, "feed: lease holds to the stream")
      ->capture_default_str();
  app.add_option("--feed-shards", o.feed_shards,
                 "feed, cluster mode: the cluster's shard count; stream i serves shard i mod N "
                 "(metadata feed-shard) with its SKUs (0: a single node)")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  app.add_option("--subscribers", o.subscribers, "watch: WatchStock streams")
      ->capture_default_str();
  app.add_option("--watch-filter", o.watch_filter, "watch: sku (one SKU each) | all")
      ->capture_default_str();
  app.add_option("--subscriber-channels", o.subscriber_channels,
                 "watch: channels (connections) for the subscribers (0: one per 500)")
      ->capture_default_str();
  app.add_option("--connect-timeout-s", o.connect_timeout_s,
                 "connecting channels / watch subscribers")
      ->capture_default_str();
  app.add_option("--rng-seed", o.rng_seed, "0: random");
  app.add_option("--server-pid", o.server_pid,
                 "also report this process's CPU and the machine's busy CPU over the window");
  app.add_flag("--json", o.json, "one-line JSON summary on stdout (report on stderr)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "loadgen: %s\n", msg.c_str());
    return 2;
  };
  if (!ValidTarget(o.target))
    return fail("--target must be 127.0.0.1:PORT, got '" + o.target + "'");
  const std::vector<std::pair<std::string, Scenario>> kScenarios = {
      {"echo", Scenario::kEcho},
      {"reserve", Scenario::kReserve},
      {"reserve-commit", Scenario::kReserveCommit},
      {"create-order", Scenario::kCreateOrder},
      {"feed", Scenario::kFeed},
      {"watch", Scenario::kWatch}};
  bool known = false;
  for (const auto& [name, sc] : kScenarios) {
    if (name == o.scenario_name) {
      o.scenario = sc;
      known = true;
    }
  }
  if (!known) return fail("unknown --scenario '" + o.scenario_name + "'");
  if (o.rate > 0 && o.concurrency > 0)
    return fail("--rate (open loop) and --concurrency (closed loop) exclude each other");
  if (o.rate < 0 || o.rate > 1e7) return fail("--rate must be in (0, 1e7]");
  if (o.scenario == Scenario::kFeed && o.concurrency > 0) {
    return fail("feed: closed loop is --streams x --inflight; --concurrency does not apply");
  }
  if (o.feed_shards > 0 && o.scenario != Scenario::kFeed) {
    return fail("--feed-shards: only with --scenario feed");
  }
  if (o.feed_shards > o.skus) return fail("--feed-shards: at most --skus shards");
  if (o.rate == 0 && o.concurrency == 0 && o.scenario != Scenario::kFeed) o.concurrency = 64;
  if (o.threads < 1 || o.threads > 64) return fail("--threads must be in [1, 64]");
  if (o.channels < 1 || o.channels > 1024) return fail("--channels must be in [1, 1024]");
  if (o.concurrency < 0 || o.concurrency > 100000)
    return fail("--concurrency must be in [1, 100000]");
  if (o.duration_s <= 0 || o.duration_s > 3600) return fail("--duration-s must be in (0, 3600]");
  if (o.warmup_s < 0 || o.warmup_s > 600) return fail("--warmup-s must be in [0, 600]");
  if (o.call_timeout_ms < 1 || o.call_timeout_ms > 60000)
    return fail("--call-timeout-ms must be in [1, 60000]");
  if (o.drain_s <= 0) o.drain_s = static_cast<double>(o.call_timeout_ms) / 1000.0 + 1.0;
  if (o.max_inflight < o.threads) return fail("--max-inflight must be >= --threads");
  if (o.skus < 1 || o.skus > 10'000'000) return fail("--skus must be in [1, 10000000]");
  if (o.hot_skus < 0 || o.hot_skus >= o.skus) return fail("--hot-skus must be in [0, --skus)");
  if (o.hot_fraction < 0 || o.hot_fraction > 1) return fail("--hot-fraction must be in [0, 1]");
  if (o.streams < 1 || o.inflight < 1) return fail("--streams and --inflight must be >= 1");
  if (o.subscribers < 0 || o.subscribers > 100000)
    return fail("--subscribers must be in [0, 100000]");
  if (o.watch_filter != "sku" && o.watch_filter != "all")
    return fail("--watch-filter must be sku or all");
  if (o.subscriber_channels < 0 || o.subscriber_channels > 1024)
    return fail("--subscriber-channels must be in [0, 1024]");
  if (o.order_items < 1 || o.order_items > 100) return fail("--order-items must be in [1, 100]");
  if (o.payload_bytes < 0 || o.payload_bytes > (1 << 20))
    return fail("--payload-bytes must be in [0, 1 MiB]");
  if (o.seed_concurrency < 1) return fail("--seed-concurrency must be >= 1");

  return -1;
}

}  // namespace feed::loadgen

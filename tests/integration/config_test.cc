// The server's configuration: flags, environment, config file, validation.
#include "server/config.h"

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace feed::server {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ParseResult> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "feed-server");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseServerConfig(static_cast<int>(argv.size()), argv.data());
}

TEST(ConfigTest, DefaultsAreTheDocumentedOnes) {
  auto r = Parse({});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->config);
  EXPECT_EQ(r->config->listen, "127.0.0.1:50051");
  EXPECT_EQ(r->config->storage.path, "./data");
  EXPECT_EQ(r->config->storage.durability, storage::Durability::kSync);
  EXPECT_EQ(r->config->core.limits.max_lines_per_request, 100u);
  EXPECT_EQ(r->config->max_receive_message_bytes, 1 << 20);
  EXPECT_TRUE(r->config->kafka.brokers.empty());
  EXPECT_EQ(r->config->storage.memtable_budget_bytes, size_t{32} << 20);
  EXPECT_EQ(r->config->core.history_retention_ms, 30LL * 24 * 3600 * 1000);
  EXPECT_EQ(r->config->storage.block_cache_bytes, size_t{64} << 20);
  EXPECT_FALSE(r->config->kafka.json_values);
  EXPECT_EQ(r->config->stream_conflate_after, 1024);
  EXPECT_EQ(r->config->stream_conflate_after_ms, 20);
  EXPECT_EQ(r->config->stream_max_queued_levels, 10000);
}

TEST(ConfigTest, FlagsEnvironmentAndFile) {
  setenv("FEED_MAX_LINES", "7", 1);
  char path[] = "/tmp/feed-config-XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << "durability = \"async\"\nmax-quantity = 500\n";
  auto r = Parse({"--config", path, "--listen", "127.0.0.1:7000", "--kafka-property",
                  "security.protocol=SSL", "--kafka-property", "linger.ms=1",
                  "--kafka-value-format", "json"});
  unsetenv("FEED_MAX_LINES");
  std::remove(path);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& c = *r->config;
  EXPECT_EQ(c.listen, "127.0.0.1:7000");
  EXPECT_EQ(c.storage.durability, storage::Durability::kAsync);
  EXPECT_EQ(c.core.limits.max_quantity, 500);
  EXPECT_EQ(c.core.limits.max_lines_per_request, 7u);
  EXPECT_EQ(c.kafka.kafka_properties.at("security.protocol"), "SSL");
  EXPECT_EQ(c.kafka.kafka_properties.at("linger.ms"), "1");
  EXPECT_TRUE(c.kafka.json_values);
}

TEST(ConfigTest, InvalidValuesStopTheStartWithOneClearLine) {
  auto bad_mode = Parse({"--durability", "sometimes"});
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_THAT(bad_mode.status().message(), HasSubstr("--durability"));
  auto zero = Parse({"--max-lines", "0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("--max-lines"));
  auto property = Parse({"--kafka-property", "novalue"});
  ASSERT_FALSE(property.ok());
  EXPECT_THAT(property.status().message(), HasSubstr("key=value"));
  auto ttl = Parse({"--hold-ttl-ms", "900000", "--max-hold-ttl-ms", "60000"});
  ASSERT_FALSE(ttl.ok());
  EXPECT_THAT(ttl.status().message(), HasSubstr("--max-hold-ttl-ms"));
  // Below gRPC 1.51's safe floor (config.cc); 10 s itself is accepted.
  auto keepalive = Parse({"--keepalive-time-ms", "1000"});
  ASSERT_FALSE(keepalive.ok());
  EXPECT_THAT(keepalive.status().message(), HasSubstr("--keepalive-time-ms"));
  EXPECT_THAT(keepalive.status().message(), HasSubstr("10000"));
  auto keepalive_floor = Parse({"--keepalive-time-ms", "10000"});
  ASSERT_TRUE(keepalive_floor.ok()) << keepalive_floor.status();
  EXPECT_EQ(keepalive_floor->config->keepalive_time_ms, 10000);
  auto tiny_memtables = Parse({"--rocksdb-memtable-mb", "1"});
  ASSERT_FALSE(tiny_memtables.ok());
  EXPECT_THAT(tiny_memtables.status().message(), HasSubstr("--rocksdb-memtable-mb"));
  auto rocksdb_memory = Parse({"--rocksdb-memtable-mb", "256", "--rocksdb-block-cache-mb", "32"});
  ASSERT_TRUE(rocksdb_memory.ok()) << rocksdb_memory.status();
  EXPECT_EQ(rocksdb_memory->config->storage.memtable_budget_bytes, size_t{256} << 20);
  EXPECT_EQ(rocksdb_memory->config->storage.block_cache_bytes, size_t{32} << 20);
  auto unknown = Parse({"--no-such-flag"});
  ASSERT_FALSE(unknown.ok());
  for (const auto& s : {bad_mode.status(), zero.status(), property.status(), unknown.status()}) {
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << s.message();
  }
}

// TLS and authentication flags: pairs that need each other, and --require-secure.
TEST(ConfigTest, ClusterModeNeedsANodeIdAndBrokersAndDropsTheSingleNodeOnlyParts) {
  auto single = Parse({});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->config->cluster.shards, 0);

  auto no_id = Parse({"--cluster-shards", "12", "--kafka-brokers", "127.0.0.1:19092"});
  ASSERT_FALSE(no_id.ok());
  EXPECT_THAT(no_id.status().message(), HasSubstr("--cluster-node-id"));
  auto bad_id = Parse(
      {"--cluster-shards", "12", "--cluster-node-id", "a b", "--kafka-brokers", "127.0.0.1:19092"});
  ASSERT_FALSE(bad_id.ok());
  EXPECT_THAT(bad_id.status().message(), HasSubstr("got 'a b'"));
  auto no_brokers = Parse({"--cluster-shards", "12", "--cluster-node-id", "n1"});
  ASSERT_FALSE(no_brokers.ok());
  EXPECT_THAT(no_brokers.status().message(), HasSubstr("--cluster-brokers"));
  auto http = Parse({"--cluster-shards", "12", "--cluster-node-id", "n1", "--kafka-brokers",
                     "127.0.0.1:19092", "--http-listen", "127.0.0.1:8081",
                     "--cluster-rounds-in-flight", "2"});
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->config->http.listen, "127.0.0.1:8081");  // given: the gateway runs
  EXPECT_EQ(http->config->core.replication_rounds_in_flight, 2u);
  auto rounds = Parse({"--cluster-shards", "12", "--cluster-node-id", "n1", "--kafka-brokers",
                       "b:1", "--cluster-rounds-in-flight", "0"});
  ASSERT_FALSE(rounds.ok());
  EXPECT_THAT(rounds.status().message(), HasSubstr("--cluster-rounds-in-flight"));
  auto isr = Parse({"--cluster-shards", "12", "--cluster-node-id", "n1", "--kafka-brokers", "b:1",
                    "--cluster-min-insync-replicas", "2"});
  ASSERT_FALSE(isr.ok());
  EXPECT_THAT(isr.status().message(), HasSubstr("must not exceed --cluster-replication-factor"));

  auto ok = Parse({"--cluster-shards", "12", "--cluster-node-id", "node-1.a_b", "--kafka-brokers",
                   "127.0.0.1:19092", "--listen", "127.0.0.1:7001"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  const auto& c = ok->config->cluster;
  EXPECT_EQ(c.shards, 12);
  EXPECT_EQ(c.brokers, "127.0.0.1:19092");   // from --kafka-brokers
  EXPECT_EQ(c.advertise, "127.0.0.1:7001");  // from --listen
  EXPECT_EQ(c.topic, "feed.shard-log.v1");
  EXPECT_EQ(c.session_timeout_ms, 6000);
  // Not given: no gateway (nodes sharing a host would all want the default port).
  EXPECT_TRUE(ok->config->http.listen.empty());
  EXPECT_EQ(ok->config->core.replication_rounds_in_flight, 4u);
}

TEST(ConfigTest, SecurityFlagsAreCheckedTogether) {
  auto half = Parse({"--tls-cert-file", "server.crt"});
  ASSERT_FALSE(half.ok());
  EXPECT_THAT(half.status().message(), HasSubstr("--tls-key-file"));
  auto ca_alone = Parse({"--tls-client-ca-file", "ca.crt"});
  ASSERT_FALSE(ca_alone.ok());
  EXPECT_THAT(ca_alone.status().message(), HasSubstr("mutual TLS needs --tls-cert-file"));
  auto bare = Parse({"--require-secure", "true"});
  ASSERT_FALSE(bare.ok());
  EXPECT_THAT(bare.status().message(), HasSubstr("without TLS"));
  EXPECT_THAT(bare.status().message(), HasSubstr("and authentication"));
  auto tls_only =
      Parse({"--require-secure", "true", "--tls-cert-file", "a", "--tls-key-file", "b"});
  ASSERT_FALSE(tls_only.ok());
  EXPECT_THAT(tls_only.status().message(), HasSubstr("without authentication"));
  auto auth_only = Parse({"--require-secure", "true", "--auth-token-file", "tokens"});
  ASSERT_FALSE(auth_only.ok());
  EXPECT_THAT(auth_only.status().message(), HasSubstr("without TLS"));
  auto secure = Parse({"--require-secure", "true", "--tls-cert-file", "a", "--tls-key-file", "b",
                       "--auth-jwt-public-key-file", "k.pem", "--auth-rate-limit", "100"});
  ASSERT_TRUE(secure.ok()) << secure.status();
  EXPECT_TRUE(secure->config->tls.enabled());
  EXPECT_TRUE(secure->config->auth.enabled());
  EXPECT_EQ(secure->config->auth.rate_limit, 100);
  auto negative = Parse({"--auth-rate-limit", "-1"});
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("--auth-rate-limit"));
}

TEST(ConfigTest, HelpListsEveryOptionAndAsksToExit) {
  testing::internal::CaptureStdout();
  auto r = Parse({"--help"});
  std::string help = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->config);
  EXPECT_EQ(r->exit_code, 0);
  for (const char* option : {"--listen", "--durability", "--max-receive-message-bytes",
                             "--max-open-streams", "--kafka-brokers", "--shutdown-grace-ms"}) {
    EXPECT_THAT(help, HasSubstr(option));
  }
}

}  // namespace
}  // namespace feed::server

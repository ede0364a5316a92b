// The Kafka security settings without a broker: the server's flags and their combinations,
// the relay's own validation, the files it watches for new credentials, and the redaction of
// the password.
//
//   ctest -L security
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bridge/relay.h"
#include "bridge/shard_group.h"
#include "bridge/shard_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "storage/rocksdb_store.h"
#include "watched_file.h"

namespace feed {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kafka-security-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    chmod(p.c_str(), 0600);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

absl::StatusOr<server::ParseResult> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "feed-server");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return server::ParseServerConfig(static_cast<int>(argv.size()), argv.data());
}

std::string ParseError(std::vector<std::string> args) {
  auto r = Parse(std::move(args));
  return r.ok() ? "(accepted)" : std::string(r.status().message());
}

class KafkaSecurityConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FEED_KAFKA_SASL_PASSWORD");
    password_file_ = dir_.File("password", "s3cret-pass\n");
    ca_file_ = dir_.File("ca.crt", "-----BEGIN CERTIFICATE-----\n");
  }
  void TearDown() override { unsetenv("FEED_KAFKA_SASL_PASSWORD"); }

  std::vector<std::string> Sasl() const {
    return {"--kafka-security-protocol", "sasl_ssl", "--kafka-sasl-username", "feed",
            "--kafka-ca-file",           ca_file_};
  }
  std::vector<std::string> With(std::vector<std::string> a,
                                const std::vector<std::string>& more) const {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }

  TempDir dir_;
  std::string password_file_;
  std::string ca_file_;
};

TEST_F(KafkaSecurityConfigTest, DefaultsArePlaintextAndScramSha512) {
  auto r = Parse({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->config->kafka.security.protocol, "plaintext");
  EXPECT_EQ(r->config->kafka.security.sasl_mechanism, "SCRAM-SHA-512");
  EXPECT_TRUE(r->config->kafka.security.sasl_password.empty());
  // The older way stays: any librdkafka setting through --kafka-property.
  auto p = Parse({"--kafka-property", "security.protocol=SSL"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->config->kafka.kafka_properties.at("security.protocol"), "SSL");
}

TEST_F(KafkaSecurityConfigTest, SaslSslWithAPasswordFile) {
  auto r = Parse(With(Sasl(), {"--kafka-sasl-password-file", password_file_,
                               "--kafka-sasl-mechanism", "SCRAM-SHA-256"}));
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& k = r->config->kafka;
  EXPECT_EQ(k.security.protocol, "sasl_ssl");
  EXPECT_EQ(k.security.sasl_username, "feed");
  EXPECT_EQ(k.security.sasl_mechanism, "SCRAM-SHA-256");
  EXPECT_EQ(k.security.sasl_password_file, password_file_);
  EXPECT_EQ(k.security.ssl_ca_file, ca_file_);
  EXPECT_TRUE(k.security.sasl_password.empty())
      << "the relay reads the file itself (and re-reads it)";
}

TEST_F(KafkaSecurityConfigTest, SaslSslWithThePasswordFromTheEnvironment) {
  setenv("FEED_KAFKA_SASL_PASSWORD", "from-env-pw", 1);
  auto r = Parse(Sasl());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->config->kafka.security.sasl_password, "from-env-pw");
  // Environment variables for the other settings work too.
  setenv("FEED_KAFKA_SECURITY_PROTOCOL", "sasl_ssl", 1);
  setenv("FEED_KAFKA_SASL_USERNAME", "env-user", 1);
  auto e = Parse({});
  unsetenv("FEED_KAFKA_SECURITY_PROTOCOL");
  unsetenv("FEED_KAFKA_SASL_USERNAME");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->config->kafka.security.sasl_username, "env-user");
}

TEST_F(KafkaSecurityConfigTest, ThePasswordIsNeverAFlag) {
  std::string e = ParseError(With(Sasl(), {"--kafka-sasl-password", "on-the-cmdline"}));
  EXPECT_THAT(e, HasSubstr("--kafka-sasl-password"));
  EXPECT_THAT(e, HasSubstr("ps"));
  EXPECT_THAT(e, HasSubstr("--kafka-sasl-password-file"));
  EXPECT_THAT(e, Not(HasSubstr("on-the-cmdline")));
  e = ParseError({"--kafka-property", "sasl.password=on-the-cmdline"});
  EXPECT_THAT(e, HasSubstr("--kafka-property sasl.password"));
  EXPECT_THAT(e, Not(HasSubstr("on-the-cmdline")));
  // --help does not offer it.
  testing::internal::CaptureStdout();
  auto help = Parse({"--help"});
  std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(help.ok());
  EXPECT_THAT(out, HasSubstr("--kafka-sasl-password-file"));
  EXPECT_THAT(out, Not(HasSubstr("--kafka-sasl-password ")));
}

TEST_F(KafkaSecurityConfigTest, CombinationsAreCheckedWithTheFlagNamed) {
  EXPECT_THAT(ParseError({"--kafka-security-protocol", "sasl"}),
              HasSubstr("--kafka-security-protocol"));
  EXPECT_THAT(ParseError({"--kafka-security-protocol", "sasl_ssl", "--kafka-sasl-password-file",
                          password_file_}),
              HasSubstr("needs --kafka-sasl-username"));
  std::string no_password = ParseError(Sasl());
  EXPECT_THAT(no_password, HasSubstr("--kafka-sasl-password-file"));
  EXPECT_THAT(no_password, HasSubstr("FEED_KAFKA_SASL_PASSWORD"));
  setenv("FEED_KAFKA_SASL_PASSWORD", "x-pw", 1);
  EXPECT_THAT(ParseError(With(Sasl(), {"--kafka-sasl-password-file", password_file_})),
              HasSubstr("both set"));
  EXPECT_THAT(ParseError({}), HasSubstr("FEED_KAFKA_SASL_PASSWORD is set"));
  unsetenv("FEED_KAFKA_SASL_PASSWORD");
  EXPECT_THAT(ParseError({"--kafka-ca-file", ca_file_}), HasSubstr("--kafka-ca-file needs"));
  EXPECT_THAT(ParseError({"--kafka-sasl-username", "u"}), HasSubstr("--kafka-sasl-username needs"));
  EXPECT_THAT(ParseError({"--kafka-security-protocol", "ssl", "--kafka-sasl-password-file",
                          password_file_}),
              HasSubstr("--kafka-sasl-password-file needs"));
  EXPECT_THAT(ParseError({"--kafka-sasl-mechanism", "PLAIN"}),
              HasSubstr("--kafka-sasl-mechanism needs"));
  EXPECT_THAT(
      ParseError({"--kafka-security-protocol", "sasl_ssl", "--kafka-sasl-mechanism", "GSSAPI"}),
      HasSubstr("--kafka-sasl-mechanism"));
  EXPECT_THAT(ParseError(With(Sasl(), {"--kafka-sasl-password-file", password_file_,
                                       "--kafka-property", "sasl.mechanisms=PLAIN"})),
              HasSubstr("--kafka-property sasl.mechanisms conflicts"));
  EXPECT_THAT(ParseError({"--kafka-security-protocol", "ssl", "--kafka-property",
                          "security.protocol=plaintext"}),
              HasSubstr("--kafka-property security.protocol conflicts"));
  EXPECT_THAT(ParseError(With(Sasl(), {"--kafka-sasl-password-file", dir_.path() + "/nope"})),
              HasSubstr("--kafka-sasl-password-file"));
  std::string empty = dir_.File("empty", "\n");
  EXPECT_THAT(ParseError(With(Sasl(), {"--kafka-sasl-password-file", empty})), HasSubstr("empty"));
  // Plain TLS needs no SASL settings.
  auto tls = Parse({"--kafka-security-protocol", "ssl", "--kafka-ca-file", ca_file_});
  EXPECT_TRUE(tls.ok()) << tls.status();
}

// ---------------------------------------------------------------------------------------

using bridge::internal::Redact;
using bridge::internal::WatchedFile;

TEST(WatchedFileTest, FollowsRewritesRenamesAndMissingFiles) {
  TempDir dir;
  std::string path = dir.File("password", "first\r\n");
  WatchedFile f(path, /*password=*/true);
  ASSERT_TRUE(f.Load().ok());
  EXPECT_EQ(f.content(), "first");
  EXPECT_FALSE(f.world_readable());
  std::string error;
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kUnchanged);

  // Rewritten in place, longer.
  dir.File("password", "second-one\n");
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kChanged);
  EXPECT_EQ(f.content(), "second-one");
  // Same content again (a touch, a rewrite with the same bytes): no change.
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  dir.File("password", "second-one\n");
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kUnchanged);
  // Replaced by a rename, same size: a change (inode and mtime differ).
  std::string tmp = dir.File("password.new", "third-one!\n");
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kChanged);
  EXPECT_EQ(f.content(), "third-one!");

  // Gone (mid-rotation): unreadable, the last content stays; back: read again.
  std::filesystem::remove(path);
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kUnreadable);
  EXPECT_THAT(error, HasSubstr(path));
  EXPECT_EQ(f.content(), "third-one!");
  dir.File("password", "");  // empty: a password file being written
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kUnreadable);
  EXPECT_THAT(error, HasSubstr("empty"));
  dir.File("password", "fourth\n");
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kChanged);
  EXPECT_EQ(f.content(), "fourth");
  EXPECT_THAT(error, Not(HasSubstr("fourth")));

  chmod(path.c_str(), 0644);
  EXPECT_EQ(f.Check(&error), WatchedFile::Poll::kUnchanged);  // ctime changed, content not
  EXPECT_TRUE(f.world_readable());

  WatchedFile missing(dir.path() + "/none", true);
  absl::Status s = missing.Load();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("none"));

  // Not a password: kept as it is, newlines included.
  std::string ca = dir.File("ca.pem", "PEM\n");
  WatchedFile c(ca, /*password=*/false);
  ASSERT_TRUE(c.Load().ok());
  EXPECT_EQ(c.content(), "PEM\n");
}

TEST(RedactTest, ReplacesEveryOccurrence) {
  EXPECT_EQ(Redact("a pw1234 b pw1234", "pw1234"), "a [redacted] b [redacted]");
  EXPECT_EQ(Redact("nothing here", "pw1234"), "nothing here");
  EXPECT_EQ(Redact("abc", ""), "abc");
  EXPECT_EQ(Redact("a b c", "b"), "a b c");  // too short to be worth it
  EXPECT_EQ(Redact("xxxxxxxx", "xxxx"), "[redacted][redacted]");
}

// ---------------------------------------------------------------------------------------

class RelaySecurityOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::RocksDbOptions ro;
    ro.path = dir_.path() + "/db";
    ro.durability = storage::Durability::kAsync;
    ro.block_cache_bytes = 8u << 20;
    auto store = storage::OpenRocksDbStore(ro);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    options_.brokers = "127.0.0.1:1";
    options_.create_topics = false;
    options_.security.protocol = "sasl_ssl";
    options_.security.sasl_username = "feed";
    options_.security.sasl_password_file = dir_.File("password", "relay-secret-pw\n");
  }
  std::string CreateError(const bridge::RelayOptions& o) {
    auto r = bridge::Relay::Create(*store_, o);
    return r.ok() ? "(accepted)" : std::string(r.status().message());
  }

  TempDir dir_;
  std::unique_ptr<storage::Store> store_;
  bridge::RelayOptions options_;
};

TEST_F(RelaySecurityOptionsTest, ValidatesAndNeverEchoesThePassword) {
  auto ok = bridge::Relay::Create(*store_, options_);
  EXPECT_TRUE(ok.ok()) << ok.status();
  if (ok.ok()) ok->reset();

  bridge::RelayOptions o = options_;
  o.security.sasl_username.clear();
  EXPECT_THAT(CreateError(o), HasSubstr("sasl_username"));
  o = options_;
  o.security.sasl_password_file.clear();
  EXPECT_THAT(CreateError(o), HasSubstr("needs a password"));
  o.security.sasl_password =
      "inline-secret-pw";  // the application's own (e.g. from the environment)
  EXPECT_EQ(CreateError(o), "(accepted)");
  o = options_;
  o.security.protocol = "plaintext";
  EXPECT_THAT(CreateError(o), HasSubstr("need security_protocol sasl_ssl"));
  o = options_;
  o.security.sasl_mechanism = "GSSAPI";
  EXPECT_THAT(CreateError(o), HasSubstr("sasl_mechanism"));
  o = options_;
  o.kafka_properties["sasl.username"] = "other";
  EXPECT_THAT(CreateError(o), HasSubstr("kafka_properties sets sasl.username"));
  o = options_;
  o.security.sasl_password_file = dir_.path() + "/missing";
  EXPECT_THAT(CreateError(o), HasSubstr("SASL password file"));
  o = options_;
  o.security.ssl_ca_file = dir_.path() + "/missing-ca";
  EXPECT_THAT(CreateError(o), HasSubstr("CA file"));
  // A secret librdkafka refuses: the error names the property, never the value.
  o = options_;
  o.security.protocol = "plaintext";
  o.security.sasl_username.clear();
  o.security.sasl_password_file.clear();
  o.kafka_properties["ssl.key.password"] = "bad-secret-value";
  o.kafka_properties["no.such.password"] = "bad-secret-value";
  std::string e = CreateError(o);
  EXPECT_THAT(e, HasSubstr("no.such.password"));
  EXPECT_THAT(e, Not(HasSubstr("bad-secret-value")));
}

// The shard log's clients (cluster mode) take the same settings and refuse the same mistakes,
// naming themselves and the field, before any connection is tried.
TEST(ShardLogSecurityOptionsTest, RefusesWhatTheRelayRefusesNamingTheShardLog) {
  TempDir dir;
  bridge::ShardLogOptions o;
  o.brokers = "127.0.0.1:1";
  o.security.protocol = "sasl_ssl";
  o.security.sasl_username = "feed";
  o.security.sasl_password_file = dir.File("password", "shard-log-secret-pw\n");
  auto writer_error = [](const bridge::ShardLogOptions& options) {
    auto w = bridge::ShardLogWriter::Open(options);
    return w.ok() ? "(accepted)" : std::string(w.status().message());
  };
  EXPECT_EQ(writer_error(o), "(accepted)");  // nothing connects until an append

  bridge::ShardLogOptions bad = o;
  bad.security.sasl_username.clear();
  EXPECT_EQ(writer_error(bad), "shard log: security_protocol sasl_ssl needs sasl_username");
  bad = o;
  bad.kafka_properties["sasl.username"] = "other";
  EXPECT_THAT(writer_error(bad), HasSubstr("shard log: kafka_properties sets sasl.username"));
  bad = o;
  bad.security.sasl_password_file = dir.path() + "/missing";
  EXPECT_THAT(writer_error(bad), HasSubstr("shard log: SASL password file"));
  bad = o;
  bad.security.protocol = "plaintext";
  EXPECT_THAT(writer_error(bad), HasSubstr("need security_protocol sasl_ssl"));

  auto reader = bridge::ShardLogReader::Open(bad, {{0, 0}});
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(std::string(reader.status().message()), HasSubstr("shard log:"));
  auto member = bridge::ShardGroupMember::Start(bad, {.group_id = "g", .instance_id = "n"},
                                                [](const bridge::ShardAssignment&) {});
  ASSERT_FALSE(member.ok());
  EXPECT_THAT(std::string(member.status().message()), HasSubstr("shard group:"));
  // The password is never in an error.
  EXPECT_THAT(writer_error(bad), Not(HasSubstr("shard-log-secret-pw")));
}

}  // namespace
}  // namespace feed

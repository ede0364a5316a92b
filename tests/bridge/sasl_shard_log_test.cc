// Cluster mode's shard log over SASL_SSL (SCRAM-SHA-512 over TLS) against the SASL_SSL broker
// (tests/bridge/sasl_broker.sh; the ctest fixture starts it, a binary run alone starts it
// itself). The writer, the readers and the group member take the relay's security settings
// (bridge/kafka_security.h).
//
// What they prove: the shard log's topic is created, appended to, read back and assigned
// through SASL_SSL; a wrong password fails appends (the acknowledgement point then fails its
// batch) until the password file is fixed, and then the same writer appends again without
// being reopened; the password never shows in anything the bridge logged.
//
//   ctest -L security
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bridge/shard_group.h"
#include "bridge/shard_log.h"
#include "gtest/gtest.h"
#include "kafka_test_util.h"
#include "sasl_test_util.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace feed::bridge {
namespace {

using namespace std::chrono_literals;
using test::CaptureSink;
using test::WaitFor;
using test::WriteFileAtomically;

constexpr int64_t kTimeoutMs = 30000;

class SaslShardLogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { broker_.Start(); }
  static void TearDownTestSuite() { broker_.Stop(); }

  void SetUp() override {
    ASSERT_TRUE(broker_.ok()) << "no SASL_SSL broker: tests/bridge/sasl_broker.sh start failed";
    char tmpl[] = "/tmp/sasl-shard-log-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    password_file_ = dir_ + "/kafka.password";
    WriteFileAtomically(password_file_, broker_.password() + "\n");
    secrets_ = {broker_.password()};

    capture_ = test::CaptureBridgeLog();

    options_.brokers = test::SaslBrokers();
    options_.topic = test::UniqueName("sasl-shard-log");
    options_.shards = 3;
    options_.append_timeout_ms = 3000;
    options_.credentials_check_ms = 200;
    options_.security.protocol = "sasl_ssl";
    options_.security.ssl_ca_file = broker_.ca_file();
    options_.security.sasl_username = broker_.user();
    options_.security.sasl_password_file = password_file_;
  }

  void TearDown() override {
    if (capture_ != nullptr) test::ExpectNoSecretLogged(*capture_, secrets_);
    spdlog::drop("bridge");
    if (broker_.ok()) test::DeleteTopics(test::PlaintextBrokers(), {options_.topic});
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  static inline test::SaslBroker broker_;
  std::string dir_;
  std::string password_file_;
  std::vector<std::string> secrets_;  // never to be found in the captured log
  std::shared_ptr<CaptureSink> capture_;
  ShardLogOptions options_;
};

TEST_F(SaslShardLogTest, TheLogIsCreatedAppendedReadAndAssignedThroughSaslSsl) {
  options_.kafka_properties["debug"] = "security";  // the SASL handshake, checked for the password
  ASSERT_TRUE(EnsureShardLogTopic(options_, kTimeoutMs).ok());
  auto writer = ShardLogWriter::Open(options_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (int32_t shard = 0; shard < options_.shards; ++shard) {
    auto offset = (*writer)->AppendAndWait(shard, "entry-" + std::to_string(shard));
    ASSERT_TRUE(offset.ok()) << offset.status();
    EXPECT_EQ(*offset, 0);
  }

  auto reader = ShardLogReader::Open(options_, {{0, 0}, {1, 0}, {2, 0}});
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::set<std::string> read;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto records = (*reader)->Poll(500, 10);
        if (!records.ok()) return false;
        for (const LoggedRecord& r : *records) {
          EXPECT_EQ(r.value, "entry-" + std::to_string(r.shard));
          read.insert(r.value);
        }
        return read.size() == 3;
      },
      30s))
      << read.size() << " of 3 records read back";
  auto end = (*reader)->EndOffset(1, kTimeoutMs);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(*end, 1);

  // The group member (membership over the same settings) is given every shard.
  std::mutex mu;
  std::set<int32_t> assigned;
  ShardGroupOptions group;
  group.group_id = test::UniqueName("sasl-group");
  group.instance_id = "sasl-node";
  auto member = ShardGroupMember::Start(options_, group, [&](const ShardAssignment& change) {
    std::lock_guard lock(mu);
    assigned.insert(change.assigned.begin(), change.assigned.end());
  });
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return assigned.size() == 3;
      },
      30s));
  EXPECT_NE(capture_->Find({"SCRAM"}), "") << "no SASL debug line was logged";
}

TEST_F(SaslShardLogTest, AWrongPasswordFailsAppendsUntilThePasswordFileIsFixed) {
  ASSERT_TRUE(EnsureShardLogTopic(options_, kTimeoutMs).ok());
  const std::string wrong = "wrong-" + broker_.password().substr(0, 6) + "-password";
  secrets_.push_back(wrong);
  WriteFileAtomically(password_file_, wrong + "\n");
  auto writer = ShardLogWriter::Open(options_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto refused = (*writer)->AppendAndWait(0, "refused");
  ASSERT_FALSE(refused.ok()) << "appended at offset " << *refused << " with a wrong password";
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_NE(capture_->Find({"shard log: kafka", "uthentication"}), "")
      << "the authentication failure was not logged";

  // Fixed on disk: the same writer logs in with it from its next connection.
  WriteFileAtomically(password_file_, broker_.password() + "\n");
  absl::StatusOr<int64_t> appended = absl::UnavailableError("not tried");
  ASSERT_TRUE(WaitFor(
      [&] {
        appended = (*writer)->AppendAndWait(0, "accepted");
        return appended.ok();
      },
      30s))
      << appended.status();
  EXPECT_NE(capture_->Find({"shard log: the SASL password file", "changed"}), "");

  // Nothing of the refused append is in the log (a timed-out retry of "accepted" may be).
  auto reader = ShardLogReader::Open(options_, {{0, 0}});
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> values;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto records = (*reader)->Poll(500, 10);
        if (records.ok()) {
          for (const LoggedRecord& r : *records) values.push_back(r.value);
        }
        return !values.empty();
      },
      30s));
  std::this_thread::sleep_for(500ms);
  if (auto more = (*reader)->Poll(500, 10); more.ok()) {
    for (const LoggedRecord& r : *more) values.push_back(r.value);
  }
  for (const std::string& v : values) EXPECT_EQ(v, "accepted");
}

}  // namespace
}  // namespace feed::bridge

// The outbox relay over SASL_SSL (SCRAM-SHA-512 over TLS) against a real broker with a
// SASL_SSL listener: tests/bridge/sasl_broker.sh, on its own ports and state dir. Under ctest
// a fixture starts it before these tests and stops it after them; run alone, the binary starts
// it itself when it is not running and then stops it at the end.
//
// What they prove: the relay delivers through SASL_SSL; a wrong password (or a CA that does not
// sign the broker's certificate) is a clear error, kafka_reachable() false and every event kept
// in the outbox; fixing the password file (or CA file) on disk resumes delivery without a
// restart, every event exactly once; replacing the producer for new credentials while records
// flow loses and doubles nothing; the password never shows in anything the relay logged.
//
//   ctest -L security
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bridge/relay.h"
#include "gtest/gtest.h"
#include "kafka_test_util.h"
#include "relay_testing.h"
#include "sasl_test_util.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "storage/rocksdb_store.h"

namespace feed::bridge {
namespace {

using namespace std::chrono_literals;
using test::CaptureSink;
using test::OutboxWriter;
using test::PlaintextBrokers;
using test::ReadFile;
using test::SaslBrokers;
using test::Summary;
using test::TopicReader;
using test::WaitFor;
using test::WriteFileAtomically;

std::string StatsString(const RelayStats& s) {
  std::ostringstream out;
  out << "delivered=" << s.delivered << " failed=" << s.failed << " depth=" << s.outbox_depth
      << " next_to_send=" << s.next_sequence_to_send << " reachable=" << s.kafka_reachable;
  return out.str();
}

class SaslRelayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    broker_.Start();
    broker_ok_ = broker_.ok();
    user_ = broker_.user();
    password_ = broker_.password();
  }

  static void TearDownTestSuite() { broker_.Stop(); }

  void SetUp() override {
    ASSERT_TRUE(broker_ok_) << "no SASL_SSL broker: tests/bridge/sasl_broker.sh start failed";
    ASSERT_FALSE(password_.empty());
    char tmpl[] = "/tmp/bridge-sasl-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    storage::RocksDbOptions ro;
    ro.path = dir_ + "/db";
    ro.durability = storage::Durability::kAsync;
    ro.block_cache_bytes = 8u << 20;
    auto store = storage::OpenRocksDbStore(ro);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    writer_ = std::make_unique<OutboxWriter>(*store_);

    capture_ = test::CaptureBridgeLog();

    password_file_ = dir_ + "/kafka.password";
    WriteFileAtomically(password_file_, password_ + "\n");
    ca_file_ = dir_ + "/ca.crt";
    std::filesystem::copy_file(std::string(FEED_SASL_TEST_DIR) + "/certs/ca.crt", ca_file_);
    secrets_ = {password_};

    options_ = test::TestRelayOptions(SaslBrokers(), "bridge-sasl-test");
    options_.security.protocol = "sasl_ssl";
    options_.security.sasl_mechanism = "SCRAM-SHA-512";
    options_.security.sasl_username = user_;
    options_.security.sasl_password_file = password_file_;
    options_.security.ssl_ca_file = ca_file_;
    options_.credentials_check_ms = 200;
  }

  void TearDown() override {
    relay_.reset();
    EXPECT_EQ(testing::LiveDeliveries(), 0) << "delivery opaques leaked";
    // (c) No password, right or wrong, in anything the relay logged.
    if (capture_ != nullptr) test::ExpectNoSecretLogged(*capture_, secrets_);
    spdlog::drop("bridge");
    if (broker_ok_ && !options_.stock_topic.empty()) {
      test::DeleteTopics(PlaintextBrokers(), test::TopicsOf(options_));
    }
    writer_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<Relay> NewRelay() {
    auto relay = Relay::Create(*store_, options_);
    EXPECT_TRUE(relay.ok()) << relay.status();
    return relay.ok() ? std::move(*relay) : nullptr;
  }

  bool WaitDrained(std::chrono::milliseconds timeout) {
    return WaitFor([&] { return relay_->stats().outbox_depth == 0; }, timeout);
  }

  // The topics are read through the broker's plaintext listener: what is checked is what the
  // relay wrote through SASL_SSL.
  Summary ReadAndCheck(std::chrono::milliseconds timeout) {
    return test::ReadAndCheck(options_, PlaintextBrokers(), writer_->written(), timeout);
  }

  int64_t StoredRecords() {
    TopicReader reader(PlaintextBrokers(), test::TopicsOf(options_), options_.partitions);
    return reader.StoredRecords();
  }

  // Holds for `d` while checking that the relay stays unreachable and delivers nothing.
  void ExpectStaysDown(std::chrono::milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
      RelayStats s = relay_->stats();
      ASSERT_FALSE(s.kafka_reachable) << StatsString(s);
      ASSERT_EQ(s.delivered, 0u) << StatsString(s);
      std::this_thread::sleep_for(100ms);
    }
  }

  static inline test::SaslBroker broker_;
  static inline bool broker_ok_ = false;
  static inline std::string user_;
  static inline std::string password_;
  std::string dir_;
  std::string password_file_;
  std::string ca_file_;
  std::vector<std::string> secrets_;  // never to be found in the captured log
  std::shared_ptr<CaptureSink> capture_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<OutboxWriter> writer_;
  RelayOptions options_;
  std::unique_ptr<Relay> relay_;
};

// (a) and (c): delivery through SASL_SSL with the right credentials, librdkafka's
// configuration dump and security/broker debug lines included in what is checked for the
// password.
TEST_F(SaslRelayTest, DeliversThroughSaslSslAndNeverLogsThePassword) {
  constexpr int kBefore = 300, kAfter = 300;
  options_.kafka_properties["debug"] = "conf,security,broker";
  writer_->Append(kBefore);
  relay_ = NewRelay();
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  for (int i = 0; i < kAfter / 30; ++i) {
    writer_->Append(30);
    relay_->Notify();
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(WaitDrained(60s)) << StatsString(relay_->stats());
  RelayStats s = relay_->stats();
  EXPECT_EQ(s.delivered, static_cast<uint64_t>(kBefore + kAfter));
  EXPECT_EQ(s.failed, 0u);
  EXPECT_TRUE(relay_->kafka_reachable());
  EXPECT_TRUE(test::Undelivered(*store_).empty());

  Summary sum = ReadAndCheck(60s);
  EXPECT_TRUE(sum.missing.empty()) << sum.missing.size() << " missing";
  EXPECT_EQ(sum.duplicates, 0u);
  EXPECT_EQ(sum.records, static_cast<uint64_t>(kBefore + kAfter));
  EXPECT_EQ(StoredRecords(), kBefore + kAfter);
  relay_->Shutdown();

  // The relay said how it connects; librdkafka dumped its configuration (the password in it
  // redacted) and logged the SASL handshake: all of it was checked for the password.
  EXPECT_NE(capture_->Find({"relay: started", "sasl_ssl, SCRAM-SHA-512 as user '" + user_ + "'"}),
            "");
  std::string dump = capture_->Find({"sasl.password"});
  EXPECT_NE(dump, "") << "no configuration dump was logged";
  std::printf("configuration dump line: %s", dump.c_str());
  EXPECT_NE(capture_->Find({"SCRAM"}), "") << "no SASL debug line was logged";
}

// (b): a wrong password keeps every event in the outbox, loudly; fixing the file on disk
// delivers them all, once, without a restart.
TEST_F(SaslRelayTest, WrongPasswordKeepsEventsUntilThePasswordFileIsFixed) {
  const std::string wrong = "wrong-" + password_.substr(0, 6) + "-password";
  secrets_.push_back(wrong);
  WriteFileAtomically(password_file_, wrong + "\n");
  // The topics exist, so that "nothing in the topics" is a count, not a missing topic.
  ASSERT_TRUE(test::CreateTopics(PlaintextBrokers(), test::TopicsOf(options_), 3));
  writer_->Append(100);
  relay_ = NewRelay();
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  writer_->Append(100);
  relay_->Notify();

  ASSERT_TRUE(WaitFor([&] { return !capture_->Find({"authentication failed"}).empty(); }, 20s))
      << StatsString(relay_->stats());
  std::string error = capture_->Find({"relay: kafka authentication failed"});
  std::printf("error logged: %s", error.c_str());
  EXPECT_NE(error.find(options_.brokers), std::string::npos) << error;
  EXPECT_NE(error.find("SCRAM-SHA-512"), std::string::npos) << error;
  EXPECT_NE(error.find(password_file_), std::string::npos) << error;
  ExpectStaysDown(2s);
  RelayStats down = relay_->stats();
  EXPECT_FALSE(relay_->kafka_reachable());
  EXPECT_EQ(down.outbox_depth, 200u) << StatsString(down);
  EXPECT_EQ(test::Undelivered(*store_).size(), 200u);
  EXPECT_EQ(StoredRecords(), 0);

  // The password file is fixed: the relay notices, replaces its producer and delivers.
  auto fixed_at = std::chrono::steady_clock::now();
  WriteFileAtomically(password_file_, password_ + "\n");
  ASSERT_TRUE(WaitDrained(30s)) << StatsString(relay_->stats());
  std::printf("fixed password: outbox drained in %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - fixed_at).count());
  EXPECT_NE(capture_->Find({"new credentials loaded", "SASL password from " + password_file_}), "");
  EXPECT_EQ(testing::ProducersCreated(*relay_), 2);
  RelayStats s = relay_->stats();
  EXPECT_TRUE(s.kafka_reachable);
  EXPECT_EQ(s.delivered, 200u);
  EXPECT_TRUE(test::Undelivered(*store_).empty());
  EXPECT_EQ(test::RelayCursor(*store_), writer_->next_sequence());

  Summary sum = ReadAndCheck(30s);
  EXPECT_TRUE(sum.missing.empty()) << sum.missing.size() << " missing";
  EXPECT_EQ(sum.duplicates, 0u);
  EXPECT_EQ(sum.records, 200u);
  EXPECT_EQ(StoredRecords(), 200);
  relay_->Shutdown();
}

// A CA that did not sign the broker's certificate: a clear TLS error, nothing delivered; the
// right CA file delivers. Then the CA file changes again while events flow (same CA, new
// bytes): the producer is replaced after the records in flight are acknowledged, and nothing
// is lost or doubled.
TEST_F(SaslRelayTest, CaFileChangesAreFollowedWithoutLosingOrDoublingEvents) {
  const std::string good_ca = ReadFile(ca_file_) + "\n";
  WriteFileAtomically(ca_file_, ReadFile(std::string(FEED_SASL_TEST_DIR) + "/certs/other-ca.crt"));
  options_.max_in_flight = 300;
  writer_->Append(50);
  relay_ = NewRelay();
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  ASSERT_TRUE(WaitFor([&] { return !capture_->Find({"relay: TLS with kafka"}).empty(); }, 20s))
      << StatsString(relay_->stats());
  std::printf("error logged: %s", capture_->Find({"relay: TLS with kafka"}).c_str());
  ExpectStaysDown(1s);
  EXPECT_EQ(relay_->stats().outbox_depth, 50u);

  WriteFileAtomically(ca_file_, good_ca);
  ASSERT_TRUE(WaitDrained(30s)) << StatsString(relay_->stats());
  EXPECT_EQ(testing::ProducersCreated(*relay_), 2);

  // Events keep coming while the CA file is rewritten.
  std::atomic<bool> stop{false};
  std::thread bg([&] {
    while (!stop.load()) {
      writer_->Append(20);
      relay_->Notify();
      std::this_thread::sleep_for(5ms);
    }
  });
  ASSERT_TRUE(WaitFor([&] { return relay_->stats().delivered >= 500; }, 30s));
  WriteFileAtomically(ca_file_, good_ca + "# rotated\n");
  bool swapped = WaitFor([&] { return testing::ProducersCreated(*relay_) == 3; }, 10s);
  std::this_thread::sleep_for(500ms);
  stop.store(true);
  bg.join();
  ASSERT_TRUE(swapped);
  relay_->Notify();
  ASSERT_TRUE(WaitDrained(30s)) << StatsString(relay_->stats());
  Summary sum = ReadAndCheck(30s);
  const size_t written = writer_->written().size();
  std::printf("ca rotation: %zu events, %llu records, %llu duplicates, %zu missing\n", written,
              static_cast<unsigned long long>(sum.records),
              static_cast<unsigned long long>(sum.duplicates), sum.missing.size());
  EXPECT_TRUE(sum.missing.empty()) << sum.missing.size() << " missing";
  // The records in flight were acknowledged before the producer went: none is sent twice.
  EXPECT_EQ(sum.duplicates, 0u);
  EXPECT_EQ(capture_->Find({"may arrive twice"}), "");
  EXPECT_EQ(sum.records, written);
  relay_->Shutdown();
}

}  // namespace
}  // namespace feed::bridge

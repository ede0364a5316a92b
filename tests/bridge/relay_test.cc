// The outbox relay against a real Kafka broker (compose/kafka.sh; started when not running).
// Every test uses its own topics (unique names, deleted afterwards) and its own RocksDB store.
//
//   ctest -L kafka            everything here
//   ctest -L kafka-outage     only the broker-outage test (it stops and restarts the broker)
#include "bridge/relay.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kafka_test_util.h"
#include "relay_testing.h"
#include "storage/rocksdb_store.h"

namespace feed::bridge {
namespace {

using namespace std::chrono_literals;
using test::ConsumedRecord;
using test::OutboxWriter;
using test::Summary;
using test::TopicReader;

using test::WaitFor;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string StatsString(const RelayStats& s) {
  std::ostringstream out;
  out << "delivered=" << s.delivered << " failed=" << s.failed << " depth=" << s.outbox_depth
      << " oldest_age_ms=" << s.oldest_undelivered_age_ms
      << " next_to_send=" << s.next_sequence_to_send << " reachable=" << s.kafka_reachable
      << " lag_p50_ms=" << s.lag_p50_ms << " lag_p99_ms=" << s.lag_p99_ms;
  return out.str();
}

class RelayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { broker_ok_ = test::EnsureBroker(); }

  void SetUp() override {
    ASSERT_TRUE(broker_ok_) << "no Kafka broker: compose/kafka.sh start failed";
    char tmpl[] = "/tmp/bridge-relay-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    storage::RocksDbOptions ro;
    ro.path = dir_;
    ro.durability = storage::Durability::kAsync;
    ro.block_cache_bytes = 8u << 20;
    auto store = storage::OpenRocksDbStore(ro);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    writer_ = std::make_unique<OutboxWriter>(*store_);

    options_ = test::TestRelayOptions(test::Brokers(), "bridge-relay-test");
    options_.shutdown_flush_ms = 5000;
  }

  void TearDown() override {
    relay_.reset();
    EXPECT_EQ(testing::LiveDeliveries(), 0) << "delivery opaques leaked";
    if (!options_.stock_topic.empty() && broker_ok_ && delete_topics_) {
      test::DeleteTopics(test::Brokers(), Topics());
    }
    writer_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The topics deleted and created again, empty, once every partition answers: a record
  // produced while the broker still settles the deletion can land in the old topic and be lost
  // with it (seen once: 58 of 60 replayed records readable).
  void RecreateTopics() {
    test::DeleteTopics(options_.brokers, Topics());
    ASSERT_TRUE(test::CreateTopics(options_.brokers, Topics(), options_.partitions));
    TopicReader reader(options_.brokers, Topics(), options_.partitions);
    ASSERT_TRUE(WaitFor([&] { return reader.StoredRecords() == 0; }, 10s));
    std::this_thread::sleep_for(1s);
  }

  std::vector<std::string> Topics() const {
    return {options_.stock_topic, options_.order_status_topic, options_.receipt_topic};
  }

  std::unique_ptr<Relay> NewRelay(const RelayOptions& options) {
    auto relay = Relay::Create(*store_, options);
    EXPECT_TRUE(relay.ok()) << relay.status();
    return relay.ok() ? std::move(*relay) : nullptr;
  }

  bool WaitDrained(Relay& relay, std::chrono::milliseconds timeout) {
    return WaitFor([&] { return relay.stats().outbox_depth == 0; }, timeout);
  }

  // Reads the topics until every written sequence was seen and checks every record
  // (test::ReadAndCheck).
  Summary ReadAndCheck(const std::map<uint64_t, std::string>& written,
                       std::chrono::milliseconds timeout, bool json = false,
                       uint64_t lean_count = 0) {
    return test::ReadAndCheck(options_, options_.brokers, written, timeout, json, lean_count);
  }

  static inline bool broker_ok_ = false;
  std::string dir_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<OutboxWriter> writer_;
  RelayOptions options_;
  std::unique_ptr<Relay> relay_;
  bool delete_topics_ = true;
  uint64_t last_skipped_ = 0;
};

// Writes batches of events (and notifies the relay) until stopped.
class BackgroundWriter {
 public:
  BackgroundWriter(OutboxWriter& writer, std::function<Relay*()> relay, int batch,
                   std::chrono::milliseconds period)
      : thread_([this, &writer, relay, batch, period] {
          while (!stop_.load()) {
            writer.Append(batch);
            if (Relay* r = relay()) r->Notify();
            std::this_thread::sleep_for(period);
          }
        }) {}
  ~BackgroundWriter() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(RelayTest, DeliversEveryEventOnceWithHeadersInKeyOrder) {
  constexpr int kBefore = 1500, kAfter = 1500;
  writer_->Append(kBefore);
  auto t0 = std::chrono::steady_clock::now();
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  for (int i = 0; i < kAfter / 50; ++i) {
    writer_->Append(50);
    relay_->Notify();
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_TRUE(WaitDrained(*relay_, 60s)) << StatsString(relay_->stats());
  double drain_s = SecondsSince(t0);
  RelayStats s = relay_->stats();
  std::printf("relay: %d events drained in %.2f s (topic creation included); %s\n",
              kBefore + kAfter, drain_s, StatsString(s).c_str());
  EXPECT_EQ(s.delivered, static_cast<uint64_t>(kBefore + kAfter));
  EXPECT_EQ(s.failed, 0u);
  EXPECT_TRUE(s.kafka_reachable);
  EXPECT_TRUE(relay_->kafka_reachable());
  EXPECT_EQ(s.oldest_undelivered_age_ms, 0);
  EXPECT_GE(s.lag_p99_ms, s.lag_p50_ms);
  EXPECT_GT(s.lag_p99_ms, 0);

  // The outbox is empty and the cursor points after the last event.
  EXPECT_TRUE(test::Undelivered(*store_).empty());
  EXPECT_EQ(test::RelayCursor(*store_), writer_->next_sequence());

  Summary sum = ReadAndCheck(writer_->written(), 60s);
  EXPECT_TRUE(sum.missing.empty())
      << sum.missing.size() << " sequences missing, first " << sum.missing.front();
  EXPECT_EQ(sum.duplicates, 0u);
  EXPECT_EQ(sum.records, static_cast<uint64_t>(kBefore + kAfter));
  TopicReader reader(options_.brokers, Topics(), options_.partitions);
  EXPECT_EQ(reader.StoredRecords(), kBefore + kAfter);  // exactly one record per event
  relay_->Shutdown();
}

TEST_F(RelayTest, JsonValues) {
  options_.json_values = true;
  writer_->Append(30);
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  ASSERT_TRUE(WaitDrained(*relay_, 60s)) << StatsString(relay_->stats());
  Summary sum = ReadAndCheck(writer_->written(), 30s, /*json=*/true);
  EXPECT_TRUE(sum.missing.empty());
  EXPECT_EQ(sum.records, 30u);
}

TEST_F(RelayTest, SkipsOnlyAnEntryThatIsNotAnEvent) {
  writer_->Append(2);
  writer_->AppendRaw(std::string("\xff\xff\xff\xff", 4));  // sequence 3: not a protobuf
  writer_->Append(2);
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  ASSERT_TRUE(WaitDrained(*relay_, 60s)) << StatsString(relay_->stats());
  RelayStats s = relay_->stats();
  EXPECT_EQ(s.delivered, 4u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_TRUE(test::Undelivered(*store_).empty());
  EXPECT_EQ(test::RelayCursor(*store_), 6u);
  Summary sum = ReadAndCheck(writer_->written(), 30s);
  EXPECT_TRUE(sum.missing.empty());
  EXPECT_EQ(sum.records, 4u);
  EXPECT_FALSE(sum.copies.count(3));
}

// Label kafka-outage: stops the broker for about 10 s while events keep coming.
// Knobs for longer manual runs: BRIDGE_OUTAGE_SECONDS (10), BRIDGE_OUTAGE_BATCH (5 events per
// 10 ms), BRIDGE_OUTAGE_MAX_IN_FLIGHT (500), BRIDGE_OUTAGE_LEAN=1 (the test keeps no copy of
// the events, so that RSS shows the relay and the store only).
TEST_F(RelayTest, BrokerOutageGrowsOutboxThenDrains) {
  const int outage_s = EnvInt("BRIDGE_OUTAGE_SECONDS", 10);
  const bool lean = EnvInt("BRIDGE_OUTAGE_LEAN", 0) != 0;
  writer_->set_retain(!lean);
  options_.max_in_flight = static_cast<size_t>(EnvInt("BRIDGE_OUTAGE_MAX_IN_FLIGHT", 500));
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  std::atomic<Relay*> relay{relay_.get()};
  BackgroundWriter bg(
      *writer_, [&] { return relay.load(); }, EnvInt("BRIDGE_OUTAGE_BATCH", 5),
      10ms);  // default ~400-500 events/s

  ASSERT_TRUE(WaitFor([&] { return relay_->stats().delivered >= 500; }, 60s))
      << StatsString(relay_->stats());
  long rss_before = test::RssKiB();
  auto stop_at = std::chrono::steady_clock::now();
  ASSERT_EQ(test::KafkaScript("stop"), 0);
  std::printf("outage: broker stopped in %.1f s\n", SecondsSince(stop_at));
  ASSERT_TRUE(WaitFor([&] { return !relay_->kafka_reachable(); }, 30s))
      << StatsString(relay_->stats());
  std::printf("outage: relay reported unreachable %.1f s after the stop began\n",
              SecondsSince(stop_at));
  RelayStats at_down = relay_->stats();

  // ~10 s of outage: the outbox grows, the window stays within max_in_flight.
  uint64_t max_window = 0;
  auto outage_start = std::chrono::steady_clock::now();
  while (SecondsSince(outage_start) < outage_s) {
    RelayStats s = relay_->stats();
    uint64_t cursor = test::RelayCursor(*store_);
    if (s.next_sequence_to_send > cursor) {
      max_window = std::max(max_window, s.next_sequence_to_send - cursor);
    }
    EXPECT_FALSE(s.kafka_reachable);
    std::this_thread::sleep_for(250ms);
    if (outage_s > 10 && static_cast<int>(SecondsSince(outage_start) * 4) % 20 == 0) {
      std::printf("outage: t=%.0f s depth %llu RSS %ld KiB\n", SecondsSince(outage_start),
                  static_cast<unsigned long long>(s.outbox_depth), test::RssKiB());
    }
  }
  RelayStats at_end = relay_->stats();
  long rss_during = test::RssKiB();
  std::printf(
      "outage: depth %llu -> %llu, oldest undelivered %lld ms, max window %llu "
      "(max_in_flight %zu), RSS %ld -> %ld KiB\n",
      static_cast<unsigned long long>(at_down.outbox_depth),
      static_cast<unsigned long long>(at_end.outbox_depth),
      static_cast<long long>(at_end.oldest_undelivered_age_ms),
      static_cast<unsigned long long>(max_window), options_.max_in_flight, rss_before, rss_during);
  EXPECT_GT(at_end.outbox_depth, at_down.outbox_depth + 2000);
  EXPECT_LE(max_window, options_.max_in_flight);
  EXPECT_GE(at_end.oldest_undelivered_age_ms, (outage_s - 1) * 1000);

  auto start_at = std::chrono::steady_clock::now();
  ASSERT_EQ(test::KafkaScript("start"), 0);
  std::printf("outage: broker started in %.1f s\n", SecondsSince(start_at));
  std::this_thread::sleep_for(2s);  // events keep coming after the broker is back
  bg.Stop();
  ASSERT_TRUE(WaitDrained(*relay_, 120s)) << StatsString(relay_->stats());
  RelayStats done = relay_->stats();
  std::printf("outage: drained %.1f s after the broker start; %s; RSS %ld KiB\n",
              SecondsSince(start_at), StatsString(done).c_str(), test::RssKiB());
  EXPECT_TRUE(done.kafka_reachable);

  auto written = writer_->written();
  uint64_t total = writer_->next_sequence() - 1;
  Summary sum = ReadAndCheck(written, 120s, false, lean ? total : 0);
  std::printf("outage: %llu events, %llu records, %llu duplicates, %zu missing\n",
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(sum.records),
              static_cast<unsigned long long>(sum.duplicates), sum.missing.size());
  RecordProperty("duplicates", static_cast<int>(sum.duplicates));
  EXPECT_TRUE(sum.missing.empty())
      << sum.missing.size() << " missing, first " << sum.missing.front();
  relay_->Shutdown();
}

TEST_F(RelayTest, RestartMidStreamLosesNothing) {
  options_.max_in_flight = 200;
  options_.shutdown_flush_ms = 0;  // give up what is in flight at once: it stays in the outbox
  std::atomic<Relay*> relay{nullptr};
  BackgroundWriter bg(
      *writer_, [&] { return relay.load(); }, 20, 5ms);

  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  relay.store(relay_.get());
  ASSERT_TRUE(WaitFor([&] { return relay_->stats().delivered >= 1000; }, 60s))
      << StatsString(relay_->stats());
  relay.store(nullptr);
  auto t0 = std::chrono::steady_clock::now();
  relay_->Shutdown();
  double shutdown_s = SecondsSince(t0);
  RelayStats first = relay_->stats();
  relay_.reset();

  // The outbox now holds exactly the sequences from the cursor on.
  std::this_thread::sleep_for(300ms);  // the writer goes on meanwhile
  uint64_t cursor = test::RelayCursor(*store_);
  auto left = test::Undelivered(*store_);
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left.begin()->first, cursor);
  std::printf("restart: first relay delivered %llu, shut down in %.3f s, cursor %llu, %zu left\n",
              static_cast<unsigned long long>(first.delivered), shutdown_s,
              static_cast<unsigned long long>(cursor), left.size());

  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  relay.store(relay_.get());
  std::this_thread::sleep_for(1s);
  bg.Stop();
  relay_->Notify();
  ASSERT_TRUE(WaitDrained(*relay_, 60s)) << StatsString(relay_->stats());

  auto written = writer_->written();
  Summary sum = ReadAndCheck(written, 60s);
  std::printf("restart: %zu events, %llu records, %llu duplicates, %zu missing\n", written.size(),
              static_cast<unsigned long long>(sum.records),
              static_cast<unsigned long long>(sum.duplicates), sum.missing.size());
  RecordProperty("duplicates", static_cast<int>(sum.duplicates));
  EXPECT_TRUE(sum.missing.empty())
      << sum.missing.size() << " missing, first " << sum.missing.front();
  EXPECT_EQ(sum.records, written.size() + sum.duplicates);
}

// What a kill -9 leaves behind: records in Kafka past the stored cursor. The tail check finds
// them and the relay sends only what is missing; without it (skip_delivered false) they come
// twice; with the topics emptied, nothing is found and everything is sent again.
TEST_F(RelayTest, SendsAgainOnlyTheEventsTheTopicsDoNotHold) {
  auto rewind_cursor = [&] {
    auto group = store_->NewWriteGroup();
    group->Put(storage::Table::kMeta, storage::meta_keys::kRelayCursor, storage::EncodeSequence(1));
    ASSERT_TRUE(store_->Commit(*group).ok());
  };
  auto deliver = [&](const RelayOptions& options) {
    relay_ = NewRelay(options);
    ASSERT_NE(relay_, nullptr);
    relay_->Start();
    relay_->Notify();
    ASSERT_TRUE(WaitDrained(*relay_, 60s)) << StatsString(relay_->stats());
    const RelayStats stats = relay_->stats();
    relay_.reset();
    last_skipped_ = stats.skipped_delivered;
  };
  writer_->Append(40);
  deliver(options_);
  EXPECT_EQ(last_skipped_, 0u);

  // The cursor lost, 20 events more: the 40 found are skipped, the 20 new ones sent.
  rewind_cursor();
  writer_->Append(20);
  deliver(options_);
  EXPECT_EQ(last_skipped_, 40u);
  Summary sum = ReadAndCheck(writer_->written(), 60s);
  EXPECT_TRUE(sum.missing.empty());
  EXPECT_EQ(sum.duplicates, 0u);
  EXPECT_EQ(sum.records, 60u);

  // Without the check, at least once: all 60 again.
  rewind_cursor();
  RelayOptions at_least_once = options_;
  at_least_once.skip_delivered = false;
  deliver(at_least_once);
  EXPECT_EQ(last_skipped_, 0u);
  sum = ReadAndCheck(writer_->written(), 60s);
  EXPECT_EQ(sum.duplicates, 60u);

  // Topics emptied (deleted and created again): nothing is found, so nothing is skipped.
  RecreateTopics();
  rewind_cursor();
  deliver(options_);
  EXPECT_EQ(last_skipped_, 0u);
  sum = ReadAndCheck(writer_->written(), 60s);
  EXPECT_TRUE(sum.missing.empty());
  EXPECT_EQ(sum.duplicates, 0u);
  EXPECT_EQ(sum.records, 60u);
}

// A downstream system lost its data: the topics deleted and created again, then the kept
// events replayed with their ids. Each arrives once; a topic filter sends only its events; a
// range older than what is kept is refused naming the oldest kept.
TEST_F(RelayTest, ReplayRepublishesTheKeptEventsWithTheirIds) {
  for (int i = 0; i < 6; ++i) writer_->Append(10);  // entries of 1..10, 11..20, ...
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  relay_->Notify();
  ASSERT_TRUE(WaitDrained(*relay_, 60s)) << StatsString(relay_->stats());
  RecreateTopics();

  ReplayRequest request;
  request.from_sequence = 1;
  request.max_records_per_second = 500;
  const auto began = std::chrono::steady_clock::now();
  auto replayed = relay_->Replay(request);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_GE(SecondsSince(began), 0.1);  // 60 records at 500/s: the rate holds
  EXPECT_EQ(replayed->first_sequence, 1u);
  EXPECT_EQ(replayed->last_sequence, 60u);
  EXPECT_EQ(replayed->records_delivered, 60u);
  Summary sum = ReadAndCheck(writer_->written(), 60s);
  EXPECT_TRUE(sum.missing.empty());
  EXPECT_EQ(sum.duplicates, 0u);
  EXPECT_EQ(sum.records, 60u);

  // Only the stock topic's events of 11..30.
  request.from_sequence = 11;
  request.to_sequence = 30;
  request.topic = options_.stock_topic;
  request.max_records_per_second = 10000;
  replayed = relay_->Replay(request);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_GT(replayed->records_sent, 0u);
  EXPECT_GT(replayed->skipped_other_topics, 0u);
  EXPECT_EQ(replayed->records_sent + replayed->skipped_other_topics, 20u);

  // What the journal no longer holds, and bad fields.
  auto group = store_->NewWriteGroup();
  group->DeleteRange(storage::Table::kJournal, storage::EncodeSequence(0),
                     storage::EncodeSequence(11));  // the entry of 1..10
  ASSERT_TRUE(store_->Commit(*group).ok());
  request = ReplayRequest();
  request.from_sequence = 3;
  auto old = relay_->Replay(request);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(old.status().message().find("the oldest sequence kept is 11"), std::string::npos)
      << old.status();
  request.from_sequence = 0;
  EXPECT_EQ(relay_->Replay(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.from_sequence = 20;
  request.to_sequence = 12;
  EXPECT_NE(relay_->Replay(request).status().message().find("to_sequence"), std::string::npos);
  request.to_sequence = 0;
  request.topic = "nope";
  EXPECT_NE(relay_->Replay(request).status().message().find("topic: 'nope'"), std::string::npos);
}

TEST_F(RelayTest, FatalProducerErrorRecreatesProducerAndResends) {
  options_.max_in_flight = 300;
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  std::atomic<Relay*> relay{relay_.get()};
  BackgroundWriter bg(
      *writer_, [&] { return relay.load(); }, 20, 5ms);
  ASSERT_TRUE(WaitFor([&] { return relay_->stats().delivered >= 500; }, 60s));
  EXPECT_EQ(testing::ProducersCreated(*relay_), 1);
  testing::InjectFatalError(*relay_);
  ASSERT_TRUE(WaitFor([&] { return testing::ProducersCreated(*relay_) == 2; }, 30s));
  std::this_thread::sleep_for(1s);
  bg.Stop();
  relay_->Notify();
  ASSERT_TRUE(WaitDrained(*relay_, 60s)) << StatsString(relay_->stats());
  auto written = writer_->written();
  Summary sum = ReadAndCheck(written, 60s);
  std::printf("fatal: %zu events, %llu records, %llu duplicates, %zu missing; %s\n", written.size(),
              static_cast<unsigned long long>(sum.records),
              static_cast<unsigned long long>(sum.duplicates), sum.missing.size(),
              StatsString(relay_->stats()).c_str());
  EXPECT_TRUE(sum.missing.empty());
}

// A measurement, not a check: run with --gtest_also_run_disabled_tests. BRIDGE_EVENTS (200000)
// events are written first, then the relay drains them.
TEST_F(RelayTest, DISABLED_Throughput) {
  const int events = EnvInt("BRIDGE_EVENTS", 200000);
  for (int i = 0; i < events; i += 1000) writer_->Append(std::min(1000, events - i), 1000);
  long rss0 = test::RssKiB();
  auto t0 = std::chrono::steady_clock::now();
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  long rss_max = rss0;
  ASSERT_TRUE(WaitFor(
      [&] {
        rss_max = std::max(rss_max, test::RssKiB());
        return relay_->stats().outbox_depth == 0;
      },
      600s));
  double s = SecondsSince(t0);
  std::printf(
      "throughput: %d events in %.2f s = %.0f events/s (topic creation included); RSS "
      "%ld -> max %ld KiB; %s\n",
      events, s, events / s, rss0, rss_max, StatsString(relay_->stats()).c_str());
}

TEST_F(RelayTest, UnreachableBrokerDoesNotBlockStartOrShutdown) {
  options_.brokers = "127.0.0.1:1";  // nothing listens there
  options_.shutdown_flush_ms = 1000;
  delete_topics_ = false;
  writer_->Append(10);
  auto t0 = std::chrono::steady_clock::now();
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  EXPECT_LT(SecondsSince(t0), 1.0);
  writer_->Append(10);
  relay_->Notify();
  std::this_thread::sleep_for(3s);
  RelayStats s = relay_->stats();
  EXPECT_FALSE(s.kafka_reachable);
  EXPECT_EQ(s.delivered, 0u);
  EXPECT_EQ(s.outbox_depth, 20u);
  EXPECT_GE(s.oldest_undelivered_age_ms, 2500);
  auto t1 = std::chrono::steady_clock::now();
  relay_->Shutdown();
  double shutdown_s = SecondsSince(t1);
  std::printf("unreachable: shutdown took %.2f s\n", shutdown_s);
  EXPECT_LT(shutdown_s, 4.0);
  EXPECT_EQ(test::Undelivered(*store_).size(), 20u);
}

TEST_F(RelayTest, RejectsInvalidOptions) {
  delete_topics_ = false;
  RelayOptions bad = options_;
  bad.brokers = "";
  EXPECT_EQ(Relay::Create(*store_, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = options_;
  bad.max_in_flight = 0;
  EXPECT_EQ(Relay::Create(*store_, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = options_;
  bad.kafka_properties["no.such.property"] = "1";
  auto r = Relay::Create(*store_, bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no.such.property"), std::string::npos) << r.status();
}

// feedctl events tail prints each event once although the topics hold every event twice.
TEST_F(RelayTest, FeedctlTailPrintsEachEventOnce) {
  constexpr int kEvents = 60;
  writer_->Append(kEvents);
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  ASSERT_TRUE(WaitDrained(*relay_, 60s));
  relay_->Shutdown();
  relay_.reset();
  // Redeliver everything: the cursor back to the start (the journal still has it all), and
  // at least once (no tail check), so that feedctl has duplicates to drop.
  auto group = store_->NewWriteGroup();
  group->Put(storage::Table::kMeta, storage::meta_keys::kRelayCursor, storage::EncodeSequence(1));
  ASSERT_TRUE(store_->Commit(*group).ok());
  options_.skip_delivered = false;
  relay_ = NewRelay(options_);
  ASSERT_NE(relay_, nullptr);
  relay_->Start();
  ASSERT_TRUE(WaitDrained(*relay_, 60s));
  EXPECT_EQ(relay_->stats().delivered, static_cast<uint64_t>(kEvents));

  std::string err_file = dir_ + "/consumer.err";
  std::string cmd = std::string(FEEDCTL_PATH) + " events tail --brokers " + options_.brokers +
                    " --group " + test::UniqueName("bridge-test-example") +
                    " --from-beginning --idle-exit-ms 4000 --topics " + options_.stock_topic + "," +
                    options_.order_status_topic + "," + options_.receipt_topic + " 2>" + err_file;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::set<uint64_t> seqs;
  int lines = 0;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    ++lines;
    unsigned long long seq = 0;
    ASSERT_EQ(std::sscanf(buf, "seq=%llu ", &seq), 1) << buf;
    seqs.insert(seq);
  }
  ASSERT_EQ(pclose(p), 0);
  std::ifstream err_in(err_file);
  std::string err_text((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(lines, kEvents) << err_text;
  EXPECT_EQ(seqs.size(), static_cast<size_t>(kEvents));
  EXPECT_NE(err_text.find(std::to_string(kEvents) + " events, " + std::to_string(kEvents) +
                          " duplicates dropped"),
            std::string::npos)
      << err_text;
}

}  // namespace
}  // namespace feed::bridge

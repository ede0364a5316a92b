#include "kafka_test_util.h"

#include "internal/v1/records.pb.h"
#include "util/journal_util.h"

#define LIBRDKAFKA_TYPECHECKS 0
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace feed::bridge::test {

using namespace std::chrono_literals;

std::string Brokers() {
  const char* port = std::getenv("KAFKA_PORT");
  return std::string("127.0.0.1:") + (port != nullptr && *port != '\0' ? port : "19092");
}

int KafkaScript(const std::string& command) {
  std::string cmd = std::string(FEED_REPO_DIR) + "/compose/kafka.sh " + command + " 1>&2";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool EnsureBroker() {
  if (KafkaScript("status >/dev/null 2>&1") == 0) return true;
  return KafkaScript("start") == 0;
}

std::string UniqueName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::ostringstream out;
  out << prefix << "-" << getpid() << "-" << now << "-" << counter.fetch_add(1);
  return out.str();
}

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::string ConsumedRecord::Header(const std::string& name, bool* found) const {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (it->first == name) {
      if (found != nullptr) *found = true;
      return it->second;
    }
  }
  if (found != nullptr) *found = false;
  return "";
}

// ---------------------------------------------------------------------------------------

TopicReader::TopicReader(const std::string& brokers, const std::vector<std::string>& topics,
                         int partitions)
    : topics_(topics), partitions_(partitions) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", UniqueName("bridge-test-reader").c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
  rd_kafka_conf_set(conf, "enable.partition.eof", "false", err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) {
    std::cerr << "TopicReader: " << err << "\n";
    rd_kafka_conf_destroy(conf);
    return;
  }
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t* parts =
      rd_kafka_topic_partition_list_new(static_cast<int>(topics.size()) * partitions);
  for (const auto& t : topics) {
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_topic_partition_list_add(parts, t.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
  }
  rd_kafka_assign(rk, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  rk_ = rk;
}

TopicReader::~TopicReader() {
  if (rk_ == nullptr) return;
  auto* rk = static_cast<rd_kafka_t*>(rk_);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
}

bool TopicReader::ReadUntil(const std::function<bool(const std::vector<ConsumedRecord>&)>& done,
                            std::chrono::milliseconds timeout) {
  if (rk_ == nullptr) return false;
  auto* rk = static_cast<rd_kafka_t*>(rk_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(records_)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(rk, 100);
    if (msg == nullptr) continue;
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ConsumedRecord r;
      r.topic = rd_kafka_topic_name(msg->rkt);
      r.partition = msg->partition;
      r.offset = msg->offset;
      if (msg->key != nullptr) r.key.assign(static_cast<const char*>(msg->key), msg->key_len);
      if (msg->payload != nullptr) {
        r.value.assign(static_cast<const char*>(msg->payload), msg->len);
      }
      rd_kafka_headers_t* headers = nullptr;
      if (rd_kafka_message_headers(msg, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name = nullptr;
        const void* value = nullptr;
        size_t size = 0;
        for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) ==
                           RD_KAFKA_RESP_ERR_NO_ERROR;
             ++i) {
          r.headers.emplace_back(name, value != nullptr
                                           ? std::string(static_cast<const char*>(value), size)
                                           : std::string());
        }
      }
      records_.push_back(std::move(r));
    } else if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      std::cerr << "TopicReader: " << rd_kafka_message_errstr(msg) << "\n";
    }
    rd_kafka_message_destroy(msg);
  }
  return true;
}

int64_t TopicReader::StoredRecords() {
  if (rk_ == nullptr) return -1;
  auto* rk = static_cast<rd_kafka_t*>(rk_);
  int64_t total = 0;
  for (const auto& t : topics_) {
    for (int p = 0; p < partitions_; ++p) {
      int64_t low = 0, high = 0;
      if (rd_kafka_query_watermark_offsets(rk, t.c_str(), p, &low, &high, 5000) !=
          RD_KAFKA_RESP_ERR_NO_ERROR) {
        return -1;
      }
      total += high - low;
    }
  }
  return total;
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

bridge::RelayOptions TestRelayOptions(const std::string& brokers, const std::string& name) {
  bridge::RelayOptions options;
  const std::string base = UniqueName(name);
  options.brokers = brokers;
  options.client_id = name;
  options.stock_topic = base + ".stock";
  options.order_status_topic = base + ".status";
  options.receipt_topic = base + ".receipts";
  options.partitions = 3;
  options.replication_factor = 1;
  options.ce_source = "urn:inventory-feed:test";
  options.idle_poll_ms = 50;
  return options;
}

namespace {

// A producer handle for admin requests to `brokers`; null when librdkafka refuses.
rd_kafka_t* NewAdminClient(const std::string& brokers) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) rd_kafka_conf_destroy(conf);
  return rk;
}

}  // namespace

void DeleteTopics(const std::string& brokers, const std::vector<std::string>& topics) {
  rd_kafka_t* rk = NewAdminClient(brokers);
  if (rk == nullptr) return;
  std::vector<rd_kafka_DeleteTopic_t*> del;
  for (const auto& t : topics) del.push_back(rd_kafka_DeleteTopic_new(t.c_str()));
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_DeleteTopics(rk, del.data(), del.size(), nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 10000);
  if (ev != nullptr) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_DeleteTopic_destroy_array(del.data(), del.size());
  rd_kafka_destroy(rk);
}

bool CreateTopics(const std::string& brokers, const std::vector<std::string>& topics,
                  int partitions) {
  rd_kafka_t* rk = NewAdminClient(brokers);
  if (rk == nullptr) return false;
  std::vector<rd_kafka_NewTopic_t*> create;
  char err[512];
  for (const auto& t : topics) {
    create.push_back(rd_kafka_NewTopic_new(t.c_str(), partitions, 1, err, sizeof err));
  }
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, create.data(), create.size(), nullptr, q);
  bool ok = false;
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 15000);
  if (ev != nullptr) {
    size_t n = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    ok = rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR && n == topics.size();
    for (size_t i = 0; i < n; ++i) {
      rd_kafka_resp_err_t e = rd_kafka_topic_result_error(results[i]);
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        std::cerr << "CreateTopics: " << rd_kafka_topic_result_name(results[i]) << ": "
                  << rd_kafka_err2str(e) << "\n";
        ok = false;
      }
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy_array(create.data(), create.size());
  rd_kafka_destroy(rk);
  return ok;
}

// ---------------------------------------------------------------------------------------

OutboxWriter::OutboxWriter(storage::Store& store, std::string store_id)
    : store_(store), store_id_(std::move(store_id)) {}

events::v1::Event OutboxWriter::MakeEvent(uint64_t seq, int keys) const {
  events::v1::Event e;
  e.set_event_id(store_id_ + "-" + std::to_string(seq));
  // Every other event has an actor, so that both the header and its absence are checked.
  if (seq % 2 == 0) e.set_actor("subject-" + std::to_string(seq % 5));
  e.set_sequence(seq);
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  e.mutable_occurred_at()->set_seconds(now_ms / 1000);
  e.mutable_occurred_at()->set_nanos(static_cast<int32_t>((now_ms % 1000) * 1'000'000));
  std::string k = std::to_string(seq % static_cast<uint64_t>(keys));
  switch (seq % 3) {
    case 0: {
      e.set_type("inventory.stock.changed");
      e.set_key("SKU-" + k);
      auto* c = e.mutable_stock_changed();
      c->mutable_level()->set_sku("SKU-" + k);
      c->mutable_level()->set_location("WH-1");
      c->mutable_level()->set_on_hand(static_cast<int64_t>(seq));
      c->mutable_level()->set_sequence(seq);
      c->set_delta_on_hand(1);
      c->set_cause(events::v1::STOCK_CHANGE_CAUSE_ADJUST);
      break;
    }
    case 1: {
      e.set_type("order.status.changed");
      e.set_key("ORD-" + k);
      auto* c = e.mutable_order_status_changed();
      c->set_order_id("ORD-" + k);
      c->set_status(order::v1::ORDER_STATUS_PACKING);
      c->set_status_name("PACKING");
      break;
    }
    default: {
      e.set_type("order.receipt");
      e.set_key("ORD-" + k);
      auto* c = e.mutable_receipt();
      c->set_order_id("ORD-" + k);
      c->set_customer_id("cust-1");
      c->set_total_amount(12.5);
      break;
    }
  }
  return e;
}

void OutboxWriter::Append(int n, int keys) {
  if (n <= 0) return;
  std::lock_guard lock(mu_);
  std::vector<events::v1::Event> events;
  for (int i = 0; i < n; ++i) {
    uint64_t seq = next_++;
    events.push_back(MakeEvent(seq, keys));
    if (retain_) written_[seq] = events.back().SerializeAsString();
  }
  auto group = store_.NewWriteGroup();
  test_util::PutJournalEntry(*group, events);
  if (!store_.Commit(*group).ok()) std::abort();
}

void OutboxWriter::AppendRaw(const std::string& bytes) {
  std::lock_guard lock(mu_);
  auto group = store_.NewWriteGroup();
  uint64_t seq = next_++;
  test_util::PutJournalEvent(*group, seq, bytes);
  written_[seq] = bytes;
  if (!store_.Commit(*group).ok()) std::abort();
}

uint64_t OutboxWriter::next_sequence() const {
  std::lock_guard lock(mu_);
  return next_;
}

std::map<uint64_t, std::string> OutboxWriter::written() const {
  std::lock_guard lock(mu_);
  return written_;
}

std::vector<std::string> TopicsOf(const RelayOptions& options) {
  return {options.stock_topic, options.order_status_topic, options.receipt_topic};
}

Summary ReadAndCheck(const RelayOptions& options, const std::string& brokers,
                     const std::map<uint64_t, std::string>& written,
                     std::chrono::milliseconds timeout, bool json, uint64_t lean_count) {
  TopicReader reader(brokers, TopicsOf(options), options.partitions);
  std::set<uint64_t> expected;
  for (const auto& [seq, bytes] : written) {
    events::v1::Event e;
    if (e.ParseFromString(bytes)) expected.insert(seq);
  }
  for (uint64_t seq = 1; seq <= lean_count; ++seq) expected.insert(seq);
  std::set<uint64_t> seen;
  size_t checked = 0;
  size_t unseen = expected.size();
  reader.ReadUntil(
      [&](const std::vector<ConsumedRecord>& records) {
        for (; checked < records.size(); ++checked) {
          uint64_t seq = std::stoull(records[checked].Header("sequence"));
          if (seen.insert(seq).second && expected.count(seq)) --unseen;
        }
        return unseen == 0;
      },
      timeout);
  // Give stray extra records (there should be none beyond redeliveries) a moment to show.
  reader.ReadUntil([](const auto&) { return false; }, 500ms);

  Summary sum;
  std::map<std::string, uint64_t> last_by_key;  // topic/key -> last first-seen sequence
  for (const ConsumedRecord& r : reader.records()) {
    ++sum.records;
    bool found = false;
    std::string seq_header = r.Header("sequence", &found);
    EXPECT_TRUE(found) << "record without a sequence header at " << r.topic << "@" << r.offset;
    uint64_t seq = std::stoull(seq_header);
    auto it = written.find(seq);
    std::string stored;
    if (it != written.end()) {
      stored = it->second;
    } else if (lean_count > 0 && seq <= lean_count) {
      stored = r.value;
    } else {
      ADD_FAILURE() << "record for unknown sequence " << seq;
      continue;
    }
    events::v1::Event e;
    EXPECT_TRUE(e.ParseFromString(stored));
    EXPECT_EQ(e.sequence(), seq);
    std::string want_topic = e.has_stock_changed()          ? options.stock_topic
                             : e.has_order_status_changed() ? options.order_status_topic
                                                            : options.receipt_topic;
    EXPECT_EQ(r.topic, want_topic) << "seq " << seq;
    EXPECT_EQ(r.key, e.key()) << "seq " << seq;
    EXPECT_EQ(r.Header("ce_id"), e.event_id());
    EXPECT_EQ(r.Header("ce_type"), e.type());
    EXPECT_EQ(r.Header("actor"), e.actor()) << "seq " << seq;
    EXPECT_EQ(r.Header("ce_source"), options.ce_source);
    EXPECT_EQ(r.Header("ce_specversion"), "1.0");
    google::protobuf::Timestamp t;
    std::string ce_time = r.Header("ce_time");
    EXPECT_TRUE(google::protobuf::util::TimeUtil::FromString(ce_time, &t)) << ce_time;
    EXPECT_EQ(t.seconds(), e.occurred_at().seconds());
    EXPECT_EQ(t.nanos(), e.occurred_at().nanos());
    EXPECT_EQ(ce_time.back(), 'Z') << ce_time;
    if (json) {
      EXPECT_EQ(r.Header("content-type"), "application/json");
      events::v1::Event decoded;
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.value, &decoded).ok()) << r.value;
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(decoded, e)) << r.value;
    } else {
      EXPECT_EQ(r.Header("content-type"), "application/protobuf");
      EXPECT_EQ(r.value, stored) << "seq " << seq;
    }
    if (++sum.copies[seq] > 1) {
      ++sum.duplicates;
      continue;
    }
    // Per-key order: first deliveries of a key's events follow the sequence.
    auto& last = last_by_key[r.topic + "/" + r.key];
    EXPECT_GT(seq, last) << "key " << r.key << ": sequence " << seq << " after " << last;
    last = seq;
  }
  for (uint64_t seq : expected) {
    if (!sum.copies.count(seq)) sum.missing.push_back(seq);
  }
  return sum;
}

std::map<uint64_t, std::string> Undelivered(storage::Store& store) {
  const uint64_t cursor = std::max<uint64_t>(1, RelayCursor(store));
  std::map<uint64_t, std::string> out;
  (void)store.Scan(storage::Table::kJournal, "", "", [&](std::string_view, std::string_view v) {
    internal::v1::JournalEntry entry;
    if (!entry.ParseFromArray(v.data(), static_cast<int>(v.size()))) return true;
    for (int i = 0; i < entry.events_size(); ++i) {
      const uint64_t seq = entry.first_sequence() + static_cast<uint64_t>(i);
      if (seq >= cursor) out[seq] = entry.events(i);
    }
    return true;
  });
  return out;
}

uint64_t RelayCursor(storage::Store& store) {
  auto v = store.Get(storage::Table::kMeta, storage::meta_keys::kRelayCursor);
  if (!v.ok() || !v->has_value()) return 0;
  return storage::DecodeSequence(**v).value_or(0);
}

}  // namespace feed::bridge::test

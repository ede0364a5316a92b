// Helpers for the bridge tests: the real broker (compose/kafka.sh), a librdkafka reader of
// whole topics, and an outbox writer that stores events the way the core's writer does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bridge/relay.h"
#include "events/v1/events.pb.h"
#include "storage/store.h"

namespace feed::bridge::test {

// 127.0.0.1:$KAFKA_PORT (default 19092), the address compose/kafka.sh uses.
std::string Brokers();
// Runs `compose/kafka.sh <command>`; returns its exit status. Output goes to stderr.
int KafkaScript(const std::string& command);
// Starts the broker unless `compose/kafka.sh status` says it is up. False if it cannot.
bool EnsureBroker();
// Unique per process and call: keeps topic names and groups of reruns apart.
std::string UniqueName(const std::string& prefix);

// Polls `pred` every 20 ms until it holds (true) or `timeout` passes (false).
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// The relay options of a test: fresh topics named after `name`, 3 partitions, fast polling.
bridge::RelayOptions TestRelayOptions(const std::string& brokers, const std::string& name);
// Resident set size of this process in KiB.
long RssKiB();

struct ConsumedRecord {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  // The last header with that name, or "" (with *found = false).
  std::string Header(const std::string& name, bool* found = nullptr) const;
};

// Reads topics from their beginning with partition assignment (no consumer group).
class TopicReader {
 public:
  TopicReader(const std::string& brokers, const std::vector<std::string>& topics, int partitions);
  ~TopicReader();
  TopicReader(const TopicReader&) = delete;
  TopicReader& operator=(const TopicReader&) = delete;

  // Polls until done(records) is true or the timeout passes; returns done's last answer.
  bool ReadUntil(const std::function<bool(const std::vector<ConsumedRecord>&)>& done,
                 std::chrono::milliseconds timeout);
  const std::vector<ConsumedRecord>& records() const { return records_; }
  // Records stored in the topics (sum of high - low watermarks), or -1 on error.
  int64_t StoredRecords();

 private:
  void* rk_ = nullptr;  // rd_kafka_t
  std::vector<std::string> topics_;
  int partitions_;
  std::vector<ConsumedRecord> records_;
};

void DeleteTopics(const std::string& brokers, const std::vector<std::string>& topics);
// Creates the topics (partitions, replication factor 1); true when they exist afterwards.
bool CreateTopics(const std::string& brokers, const std::vector<std::string>& topics,
                  int partitions);
// The relay's three topics.
std::vector<std::string> TopicsOf(const RelayOptions& options);

// What the records in the topics say about the events written.
struct Summary {
  std::map<uint64_t, int> copies;  // sequence -> records carrying it
  uint64_t records = 0;
  uint64_t duplicates = 0;
  std::vector<uint64_t> missing;
};

// Reads the relay's topics from `brokers` until every written sequence was seen (or the
// timeout), then checks each record against the stored event (gtest expectations): topic,
// key, headers, value, and per-key order. lean_count > 0: nothing was retained; sequences
// 1..lean_count are expected and each record is checked against its own decoded value
// instead of the stored bytes.
Summary ReadAndCheck(const RelayOptions& options, const std::string& brokers,
                     const std::map<uint64_t, std::string>& written,
                     std::chrono::milliseconds timeout, bool json = false, uint64_t lean_count = 0);

// Appends events to the journal (the outbox) like the core's writer: one entry per call.
// Thread-safe.
class OutboxWriter {
 public:
  explicit OutboxWriter(storage::Store& store, std::string store_id = "0123456789abcdef");

  // Appends n valid events; kinds rotate stock / order status / receipt, keys rotate over
  // `keys` SKUs or order ids.
  void Append(int n, int keys = 10);
  // Appends raw bytes as the one event of an entry (for broken events).
  void AppendRaw(const std::string& bytes);

  // false: remember nothing (written() stays empty), for long runs that measure memory.
  void set_retain(bool retain) { retain_ = retain; }

  events::v1::Event MakeEvent(uint64_t sequence, int keys) const;
  uint64_t next_sequence() const;
  std::map<uint64_t, std::string> written() const;  // sequence -> stored bytes

 private:
  storage::Store& store_;
  std::string store_id_;
  mutable std::mutex mu_;
  uint64_t next_ = 1;
  std::atomic<bool> retain_{true};
  std::map<uint64_t, std::string> written_;
};

// The journal's events from the relay cursor on (sequence -> bytes): what the relay has not
// delivered yet (without a core, nothing trims the journal), and the cursor.
std::map<uint64_t, std::string> Undelivered(storage::Store& store);
uint64_t RelayCursor(storage::Store& store);  // 0 when absent

}  // namespace feed::bridge::test

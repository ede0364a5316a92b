// feed-consumer: an example downstream consumer of the inventory feed's Kafka topics.
//
// Subscribes to the three topics in a consumer group, decodes each record's value as an
// events.v1.Event (protobuf or JSON, by the record's content-type header), drops duplicates by
// event_id (the relay delivers at least once) and prints one line per event:
//
//   seq=42 id=3f2a...-42 type=inventory.stock.changed key=SKU-1 topic=inventory.stock.v1
//     partition=2 offset=17 time=2024-05-01T12:00:00.250Z on_hand=10 reserved=2 ...
//   (one line each)
//
// Offsets are stored only after an event is printed (at-least-once on the consumer side too).
// Exit status: 0 on a normal end (--max-events reached, --idle-exit-ms elapsed, SIGINT/SIGTERM).
//
//   feed-consumer --brokers 127.0.0.1:19092 --group demo --from-beginning --idle-exit-ms 5000
#define LIBRDKAFKA_TYPECHECKS 0
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "CLI/CLI.hpp"
#include "events/v1/events.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct Options {
  std::string brokers = "127.0.0.1:19092";
  std::string group = "feed-consumer";
  std::vector<std::string> topics = {"inventory.stock.v1", "orders.status.v1",
                                     "orders.receipts.v1"};
  bool from_beginning = false;
  uint64_t max_events = 0;   // 0: no limit
  int64_t idle_exit_ms = 0;  // 0: never
  size_t dedup_window = 1'000'000;
};

// Remembers the last `capacity` event ids (a consumer restarted with --from-beginning after a
// server restart sees each event once within that window).
class Deduplicator {
 public:
  explicit Deduplicator(size_t capacity) : capacity_(capacity) {}
  // True the first time an id is seen.
  bool Add(const std::string& id) {
    if (!seen_.insert(id).second) return false;
    order_.push_back(id);
    if (order_.size() > capacity_) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }

 private:
  size_t capacity_;
  std::unordered_set<std::string> seen_;
  std::deque<std::string> order_;
};

std::string HeaderValue(const rd_kafka_message_t* msg, const char* name) {
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(msg, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return "";
  const void* value = nullptr;
  size_t size = 0;
  if (rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      value == nullptr) {
    return "";
  }
  return std::string(static_cast<const char*>(value), size);
}

bool Decode(const rd_kafka_message_t* msg, events::v1::Event* event) {
  const char* data = static_cast<const char*>(msg->payload);
  if (data == nullptr) return false;
  if (HeaderValue(msg, "content-type") == "application/json") {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    return google::protobuf::util::JsonStringToMessage(std::string(data, msg->len), event, options)
        .ok();
  }
  return event->ParseFromArray(data, static_cast<int>(msg->len));
}

std::string Describe(const events::v1::Event& e) {
  std::ostringstream out;
  switch (e.payload_case()) {
    case events::v1::Event::kStockChanged: {
      const auto& c = e.stock_changed();
      out << "location=" << c.level().location() << " on_hand=" << c.level().on_hand()
          << " reserved=" << c.level().reserved() << " available=" << c.level().available()
          << " delta_on_hand=" << c.delta_on_hand() << " delta_reserved=" << c.delta_reserved()
          << " cause=" << events::v1::StockChangeCause_Name(c.cause());
      break;
    }
    case events::v1::Event::kOrderStatusChanged: {
      const auto& c = e.order_status_changed();
      out << "order=" << c.order_id() << " status=" << c.status_name();
      break;
    }
    case events::v1::Event::kReceipt: {
      const auto& c = e.receipt();
      out << "order=" << c.order_id() << " customer=" << c.customer_id()
          << " lines=" << c.lines_size() << " total=" << c.total_amount();
      break;
    }
    case events::v1::Event::PAYLOAD_NOT_SET:
      out << "payload=none";
      break;
  }
  return out.str();
}

struct RebalanceState {
  bool from_beginning = false;
  std::set<std::pair<std::string, int32_t>> reset_done;
  std::chrono::steady_clock::time_point* last_activity = nullptr;
};

void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                 rd_kafka_topic_partition_list_t* partitions, void* opaque) {
  auto* state = static_cast<RebalanceState*>(opaque);
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    if (state->from_beginning) {
      // --from-beginning: the first assignment of each partition starts at its beginning,
      // even when the group has committed offsets.
      for (int i = 0; i < partitions->cnt; ++i) {
        auto& p = partitions->elems[i];
        if (state->reset_done.insert({p.topic, p.partition}).second) {
          p.offset = RD_KAFKA_OFFSET_BEGINNING;
        }
      }
    }
    // The idle clock starts again: joining the group is not idleness.
    *state->last_activity = std::chrono::steady_clock::now();
    rd_kafka_assign(rk, partitions);
  } else {
    rd_kafka_assign(rk, nullptr);
  }
}

int Run(const Options& o) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  auto set = [&](const char* k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      std::cerr << "feed-consumer: " << k << "=" << v << ": " << err << "\n";
      return false;
    }
    return true;
  };
  if (!set("bootstrap.servers", o.brokers) || !set("group.id", o.group) ||
      !set("auto.offset.reset", o.from_beginning ? "earliest" : "latest") ||
      !set("enable.auto.offset.store", "false") || !set("client.id", "feed-consumer")) {
    rd_kafka_conf_destroy(conf);
    return 2;
  }
  auto last_activity = std::chrono::steady_clock::now();
  RebalanceState rebalance;
  rebalance.from_beginning = o.from_beginning;
  rebalance.last_activity = &last_activity;
  rd_kafka_conf_set_rebalance_cb(conf, &OnRebalance);
  rd_kafka_conf_set_opaque(conf, &rebalance);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    std::cerr << "feed-consumer: " << err << "\n";
    return 2;
  }
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t* subscription =
      rd_kafka_topic_partition_list_new(static_cast<int>(o.topics.size()));
  for (const auto& t : o.topics) {
    rd_kafka_topic_partition_list_add(subscription, t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  rd_kafka_resp_err_t serr = rd_kafka_subscribe(rk, subscription);
  rd_kafka_topic_partition_list_destroy(subscription);
  if (serr != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::cerr << "feed-consumer: subscribe: " << rd_kafka_err2str(serr) << "\n";
    rd_kafka_destroy(rk);
    return 2;
  }

  Deduplicator dedup(o.dedup_window);
  uint64_t printed = 0, duplicates = 0, undecodable = 0;
  while (!g_stop) {
    if (o.max_events > 0 && printed >= o.max_events) break;
    if (o.idle_exit_ms > 0 && std::chrono::steady_clock::now() - last_activity >=
                                  std::chrono::milliseconds(o.idle_exit_ms)) {
      break;
    }
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(rk, 100);
    if (msg == nullptr) continue;
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        std::cerr << "feed-consumer: " << rd_kafka_message_errstr(msg) << "\n";
      }
      rd_kafka_message_destroy(msg);
      continue;
    }
    last_activity = std::chrono::steady_clock::now();
    events::v1::Event event;
    if (!Decode(msg, &event)) {
      ++undecodable;
      std::cerr << "feed-consumer: undecodable record at " << rd_kafka_topic_name(msg->rkt)
                << " partition " << msg->partition << " offset " << msg->offset << "\n";
    } else if (!dedup.Add(event.event_id())) {
      ++duplicates;
    } else {
      ++printed;
      std::printf("seq=%llu id=%s type=%s key=%s topic=%s partition=%d offset=%lld time=%s %s\n",
                  static_cast<unsigned long long>(event.sequence()), event.event_id().c_str(),
                  event.type().c_str(), event.key().c_str(), rd_kafka_topic_name(msg->rkt),
                  static_cast<int>(msg->partition), static_cast<long long>(msg->offset),
                  google::protobuf::util::TimeUtil::ToString(event.occurred_at()).c_str(),
                  Describe(event).c_str());
      std::fflush(stdout);
    }
    rd_kafka_offset_store(msg->rkt, msg->partition, msg->offset);
    rd_kafka_message_destroy(msg);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  std::fprintf(stderr, "feed-consumer: %llu events, %llu duplicates dropped, %llu undecodable\n",
               static_cast<unsigned long long>(printed),
               static_cast<unsigned long long>(duplicates),
               static_cast<unsigned long long>(undecodable));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Consumes the inventory feed's Kafka topics, deduplicated by event_id"};
  app.add_option("--brokers", o.brokers, "bootstrap servers")->capture_default_str();
  app.add_option("--group", o.group, "consumer group id")->capture_default_str();
  app.add_option("--topics", o.topics, "topics to subscribe to")
      ->delimiter(',')
      ->capture_default_str();
  app.add_flag("--from-beginning", o.from_beginning,
               "start every partition at its beginning (even with committed offsets)");
  app.add_option("--max-events", o.max_events, "exit after this many distinct events (0: never)");
  app.add_option("--idle-exit-ms", o.idle_exit_ms,
                 "exit after this long without a record or a partition assignment (0: never)");
  app.add_option("--dedup-window", o.dedup_window, "event ids remembered for deduplication")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  return Run(o);
}

// feedctl events tail: the Kafka topics, decoded. Subscribes to the three topics in a consumer
// group, decodes each record's value as an events.v1.Event (protobuf or JSON, by the record's
// content-type header), drops duplicates by event_id (the relay delivers at least once) and
// prints one line per event (--json: the event as JSON). Offsets are stored only after an event
// is printed. Ends on Ctrl-C, --max-events, or --idle-exit-ms without a record.
#define LIBRDKAFKA_TYPECHECKS 0
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"
#include "google/protobuf/util/json_util.h"

namespace feedctl {
namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct TailArgs {
  std::string brokers = "127.0.0.1:19092";
  std::string group;
  std::vector<std::string> topics = {"inventory.stock.v1", "orders.status.v1",
                                     "orders.receipts.v1"};
  bool from_beginning = false;
  uint64_t max_events = 0;
  int64_t idle_exit_ms = 0;
  size_t dedup_window = 1'000'000;
};

// Remembers the last `capacity` event ids.
class Deduplicator {
 public:
  explicit Deduplicator(size_t capacity) : capacity_(capacity) {}
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
      // The first assignment of each partition starts at its beginning, even when the group
      // has committed offsets.
      for (int i = 0; i < partitions->cnt; ++i) {
        auto& p = partitions->elems[i];
        if (state->reset_done.insert({p.topic, p.partition}).second) {
          p.offset = RD_KAFKA_OFFSET_BEGINNING;
        }
      }
    }
    *state->last_activity = std::chrono::steady_clock::now();  // joining is not idleness
    rd_kafka_assign(rk, partitions);
  } else {
    rd_kafka_assign(rk, nullptr);
  }
}

int Tail(Context& ctx, const TailArgs& o) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::string group = o.group.empty() ? fmt::format("feedctl-tail-{}", ::getpid()) : o.group;
  auto set = [&](const char* k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      std::fprintf(stderr, "feedctl: events tail: %s=%s: %s\n", k, v.c_str(), err);
      return false;
    }
    return true;
  };
  if (!set("bootstrap.servers", o.brokers) || !set("group.id", group) ||
      !set("auto.offset.reset", o.from_beginning ? "earliest" : "latest") ||
      !set("enable.auto.offset.store", "false") || !set("client.id", "feedctl")) {
    rd_kafka_conf_destroy(conf);
    return kUsage;
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
    std::fprintf(stderr, "feedctl: events tail: %s\n", err);
    return kUsage;
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
    std::fprintf(stderr, "feedctl: events tail: subscribe: %s\n", rd_kafka_err2str(serr));
    rd_kafka_destroy(rk);
    return kUsage;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

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
        std::fprintf(stderr, "feedctl: events tail: %s\n", rd_kafka_message_errstr(msg));
      }
      rd_kafka_message_destroy(msg);
      continue;
    }
    last_activity = std::chrono::steady_clock::now();
    events::v1::Event event;
    if (!Decode(msg, &event)) {
      ++undecodable;
      std::fprintf(stderr,
                   "feedctl: events tail: undecodable record at %s partition %d offset %lld\n",
                   rd_kafka_topic_name(msg->rkt), static_cast<int>(msg->partition),
                   static_cast<long long>(msg->offset));
    } else if (!dedup.Add(event.event_id())) {
      ++duplicates;
    } else {
      ++printed;
      ctx.output().Print(
          event, fmt::format("{} topic={} partition={} offset={}", Describe(event),
                             rd_kafka_topic_name(msg->rkt), static_cast<int>(msg->partition),
                             static_cast<long long>(msg->offset)));
    }
    rd_kafka_offset_store(msg->rkt, msg->partition, msg->offset);
    rd_kafka_message_destroy(msg);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  std::fprintf(stderr, "feedctl: %llu events, %llu duplicates dropped, %llu undecodable\n",
               static_cast<unsigned long long>(printed),
               static_cast<unsigned long long>(duplicates),
               static_cast<unsigned long long>(undecodable));
  return kOk;
}

}  // namespace

void AddEventCommands(CLI::App& app, Context& ctx) {
  CLI::App* e = app.add_subcommand("events", "the Kafka topics");
  e->require_subcommand(1);
  auto* tail = e->add_subcommand("tail", "print the topics' events, decoded, each event once");
  auto a = std::make_shared<TailArgs>();
  tail->add_option("--brokers", a->brokers, "Kafka bootstrap servers")
      ->envname("FEEDCTL_BROKERS")
      ->capture_default_str();
  tail->add_option("--group", a->group, "consumer group (default: a new one per run)");
  tail->add_option("--topics", a->topics, "topics")->delimiter(',')->capture_default_str();
  tail->add_flag("--from-beginning", a->from_beginning,
                 "start every partition at its beginning (even with committed offsets)");
  tail->add_option("--max-events", a->max_events, "exit after this many events (0: never)");
  tail->add_option("--idle-exit-ms", a->idle_exit_ms,
                   "exit after this long without a record (0: never)");
  tail->add_option("--dedup-window", a->dedup_window, "event ids remembered")
      ->capture_default_str();
  tail->callback([&ctx, a] { ctx.run = [&ctx, a] { return Tail(ctx, *a); }; });
}

}  // namespace feedctl

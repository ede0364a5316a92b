// The outbox relay. One thread (the relay thread, feed-relay) owns the producer, the window
// of records in flight and the cursor (outbox_window.h); other threads only set flags (Notify,
// Shutdown) and read atomics (stats). Delivery reports, error events and admin results are served
// by the relay thread itself (rd_kafka_poll), so every callback below runs on it, except the log
// callback and the queue wake-up callback, which librdkafka calls from its own threads.
//
// The outbox is the journal (Table::kJournal, journal_reader.h): one entry per committed batch,
// holding its events in sequence order. The cycle: read events from the window's next_read and
// produce them while fewer than max_in_flight are unacknowledged; serve delivery reports;
// store the new relay_cursor past the lowest contiguous acknowledged prefix
// (CommitMode::kNoSync: a lost cursor only means a redelivery); sleep until Notify(), a Kafka
// event, or idle_poll_ms. The core's checkpointer deletes the entries below the cursor.
//
// Credentials (security.protocol sasl_ssl / ssl): the password file and the CA file are looked
// at every credentials_check_ms. When one changed, the relay stops producing, lets what is in
// flight be acknowledged (at most shutdown_flush_ms; at once while Kafka is unreachable, e.g.
// refusing the old password), then replaces the producer, which reads the new files, and sends
// again from the first unacknowledged sequence: the outbox stays the source of truth. The
// password never reaches a log line: librdkafka redacts it from its configuration dumps, and
// the relay redacts it from anything librdkafka logs or reports.

#include "bridge/relay.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "backoff.h"
#include "common/log_rate_limit.h"
#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "journal_reader.h"
#include "kafka_handles.h"
#include "kafka_security.h"
#include "logging.h"
#include "outbox_window.h"
#include "record.h"
#include "relay_testing.h"
#include "replayer.h"
#include "tail_check.h"
#include "topic_admin.h"
#include "watched_file.h"

namespace feed::bridge {
namespace {

using internal::Backoff;
using internal::kTopicKindCount;
using internal::OutboxWindow;
using internal::Record;
using internal::TopicKind;
using internal::WatchedFile;
using std::chrono::milliseconds;
using storage::Table;
using SteadyClock = std::chrono::steady_clock;

// While records keep being acknowledged, the cursor is stored at most this often (and at once
// when nothing is left in flight).
constexpr milliseconds kCommitInterval{5};
// While the broker looks unreachable, a metadata request checks it this often.
constexpr milliseconds kProbeInterval{1000};
constexpr int kProbeTimeoutMs = 1000;
// Admin (CreateTopics) request and operation timeouts.
constexpr int kAdminTimeoutMs = 5000;
// How long purged records may take to come back with their delivery reports.
constexpr milliseconds kPurgeDrainTimeout{2000};
// Recent commit-to-acknowledgement lags kept for the percentiles.
constexpr size_t kLagReservoir = 2048;
// Largest accepted max_in_flight (librdkafka's queue.buffering.max.messages limit).
constexpr size_t kMaxInFlightLimit = 10'000'000;

int64_t WallMillis() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Deliveries alive in this process (testing::LiveDeliveries).
std::atomic<int64_t> g_live_deliveries{0};

// Travels with a record through librdkafka as its message opaque; the delivery report frees it.
struct Delivery {
  Delivery(uint64_t seq, int64_t occurred, uint64_t gen)
      : sequence(seq), occurred_at_ms(occurred), generation(gen) {
    g_live_deliveries.fetch_add(1, std::memory_order_relaxed);
  }
  ~Delivery() { g_live_deliveries.fetch_sub(1, std::memory_order_relaxed); }
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  uint64_t sequence;
  int64_t occurred_at_ms;  // commit time of the event: the lag is measured from it
  uint64_t generation;     // window generation it was produced in (OutboxWindow)
};

bool UnknownTopicError(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC || err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
}

absl::Status ValidateSecurity(const RelayOptions& o) {
  if (absl::Status s = internal::ValidateKafkaSecurity(o.security, o.kafka_properties, "relay");
      !s.ok()) {
    return s;
  }
  if (o.credentials_check_ms < 1) {
    return absl::InvalidArgumentError("relay: credentials_check_ms must be >= 1");
  }
  return absl::OkStatus();
}

// The options without the password: the relay keeps that apart (wiped when replaced).
RelayOptions WithoutPassword(RelayOptions o) {
  internal::WipeSecret(o.security.sasl_password);
  return o;
}

absl::Status ValidateOptions(const RelayOptions& o) {
  if (o.brokers.empty()) return absl::InvalidArgumentError("relay: brokers is empty");
  for (const std::string* t : {&o.stock_topic, &o.order_status_topic, &o.receipt_topic}) {
    if (t->empty()) return absl::InvalidArgumentError("relay: a topic name is empty");
  }
  if (o.partitions < 1 && o.partitions != -1) {
    return absl::InvalidArgumentError(fmt::format(
        "relay: partitions must be >= 1 (or -1: broker default), got {}", o.partitions));
  }
  if (o.replication_factor < 1 && o.replication_factor != -1) {
    return absl::InvalidArgumentError(
        fmt::format("relay: replication_factor must be >= 1 (or -1: broker default), got {}",
                    o.replication_factor));
  }
  if (o.max_in_flight < 1 || o.max_in_flight > kMaxInFlightLimit) {
    return absl::InvalidArgumentError(fmt::format("relay: max_in_flight must be in [1, {}], got {}",
                                                  kMaxInFlightLimit, o.max_in_flight));
  }
  if (o.read_batch < 1) return absl::InvalidArgumentError("relay: read_batch must be >= 1");
  if (o.tail_check_margin_ms < 0) {
    return absl::InvalidArgumentError("relay: tail_check_margin_ms must be >= 0");
  }
  if (o.tail_check_timeout_ms < 100) {
    return absl::InvalidArgumentError("relay: tail_check_timeout_ms must be >= 100");
  }
  if (o.idle_poll_ms < 1) return absl::InvalidArgumentError("relay: idle_poll_ms must be >= 1");
  if (o.shutdown_flush_ms < 0) {
    return absl::InvalidArgumentError("relay: shutdown_flush_ms must be >= 0");
  }
  return ValidateSecurity(o);
}

class RelayImpl final : public Relay {
 public:
  RelayImpl(storage::Store& store, const RelayOptions& options,
            std::function<uint64_t()> last_sequence)
      : store_(store),
        last_sequence_(std::move(last_sequence)),
        options_(WithoutPassword(options)),
        log_(internal::BridgeLogger()),
        password_(options.security.sasl_password_file.empty() ? options.security.sasl_password
                                                              : "") {}

  ~RelayImpl() override {
    Shutdown();
    std::lock_guard lock(secret_mu_);
    internal::WipeSecret(password_);
  }

  absl::Status Init();

  void Start() override;
  void Shutdown() override;
  void Notify() override { Wake(); }
  RelayStats stats() const override;
  bool kafka_reachable() const override { return reachable_.load(std::memory_order_relaxed); }
  absl::StatusOr<ReplayResult> Replay(const ReplayRequest& request) override;

  void InjectFatalError() {
    inject_fatal_.store(true);
    Wake();
  }
  int producers_created() const { return producers_created_.load(); }

 private:
  // librdkafka callbacks (C linkage-compatible static functions; they never throw).
  static void OnDeliveryReport(rd_kafka_t* rk, const rd_kafka_message_t* msg, void* opaque);
  static void OnError(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  static void OnLog(const rd_kafka_t* rk, int level, const char* facility, const char* message);
  static void OnQueueEvent(rd_kafka_t* rk, void* opaque);

  void Wake() {
    {
      std::lock_guard lock(mu_);
      wake_ = true;
    }
    cv_.notify_one();
  }
  bool StopRequested() const { return stop_.load(std::memory_order_acquire); }

  // The client configuration both the producer and the tail check's consumer start from.
  absl::StatusOr<internal::ConfHandle> ClientConf(bool producer);
  absl::Status MakeProducer();
  void DestroyProducer();
  absl::Status LoadCredentials();
  // Looks at the watched files when due; true while new credentials wait for a new producer.
  bool CheckCredentials();
  void ReplaceProducerForCredentials();
  // `text` without the password in use (any thread).
  std::string RedactSecret(std::string_view text) const;
  std::string SecurityDescription() const;

  // Relay thread.
  void Run();
  void WaitForWork();
  void ServeKafka();
  void EnsureTopics();
  // Before sending again from the window's next_read: which of the events from there on are
  // in Kafka already (tail_check.h). Sets tail_checked_ once it could tell.
  void CheckTail();
  void FillWindow();
  bool Produce(uint64_t sequence, std::string_view stored);
  void HandleDelivery(const rd_kafka_message_t& msg, const Delivery& d);
  void HandleError(rd_kafka_resp_err_t err, std::string_view reason);
  void CommitAcked(bool force);
  void FinishReset();
  void RecreateProducer();
  void MaybeProbe();
  void SetReachable(bool reachable, std::string_view why);
  void StopProducing();
  void RecordLag(int64_t lag_ms);

  storage::Store& store_;
  const std::function<uint64_t()> last_sequence_;  // may be empty
  const RelayOptions options_;
  std::shared_ptr<spdlog::logger> log_;

  // The producer and its handles: created by Init, replaced by the relay thread after a fatal
  // error, destroyed by the relay thread when it stops (or by Shutdown if it never started).
  // The topics and the queue go before the producer (DestroyProducer).
  internal::ProducerHandle rk_;
  internal::QueueHandle main_queue_;
  internal::TopicHandle topics_[kTopicKindCount];

  // Start/Shutdown caller only.
  std::thread thread_;
  bool started_ = false;
  bool shut_down_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;  // guarded by mu_
  std::atomic<bool> stop_{false};

  // Relay thread only (and Init before the thread exists).
  OutboxWindow window_;
  uint64_t outstanding_ = 0;  // produced records whose delivery report has not come yet
  bool topics_ready_ = false;
  // False until the tail check ran since the last (re)start of the window; the ids it found,
  // each erased when its event comes up.
  bool tail_checked_ = false;
  absl::flat_hash_set<std::string> delivered_ids_;
  SteadyClock::time_point next_tail_check_{};
  Backoff tail_check_backoff_{milliseconds(100), milliseconds(10000)};
  bool reset_pending_ = false;   // a delivery failed: resend from acked_through once drained
  bool commit_pending_ = false;  // acknowledged entries waiting for the next commit
  SteadyClock::time_point resume_at_{};  // produce nothing before (failure backoff)
  SteadyClock::time_point next_topic_attempt_{};
  SteadyClock::time_point next_probe_at_{};
  SteadyClock::time_point last_commit_{};
  Backoff failure_backoff_{milliseconds(100), milliseconds(5000)};
  Backoff topic_backoff_{milliseconds(500), milliseconds(5000)};
  Backoff recreate_backoff_{milliseconds(500), milliseconds(10000)};
  LogRateLimit delivery_error_log_{milliseconds(5000)};
  LogRateLimit produce_error_log_{milliseconds(5000)};
  LogRateLimit commit_error_log_{milliseconds(5000)};
  LogRateLimit scan_error_log_{milliseconds(5000)};
  LogRateLimit topic_error_log_{milliseconds(10000)};
  LogRateLimit kafka_error_log_{milliseconds(5000)};
  LogRateLimit event_warning_log_{milliseconds(5000)};
  LogRateLimit auth_error_log_{milliseconds(10000)};
  LogRateLimit tls_error_log_{milliseconds(10000)};
  LogRateLimit credentials_read_log_{milliseconds(10000)};
  LogRateLimit tail_check_log_{milliseconds(10000)};

  // Credentials: the files watched for changes (relay thread only, and Init), and whether
  // the producer still has to be replaced to use what they hold now.
  std::unique_ptr<WatchedFile> password_file_;
  std::unique_ptr<WatchedFile> ca_file_;
  bool credentials_changed_ = false;
  SteadyClock::time_point next_credentials_check_{};
  SteadyClock::time_point swap_deadline_{};  // drain in-flight records until then
  // The SASL password the next producer is created with. Written by the relay thread, read
  // by MakeProducer and by the log callback (librdkafka's threads) to redact it.
  mutable std::mutex secret_mu_;
  std::string password_;  // guarded by secret_mu_

  // Any thread.
  std::atomic<bool> reachable_{false};
  std::atomic<bool> fatal_{false};
  std::atomic<bool> inject_fatal_{false};
  std::atomic<int> producers_created_{0};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> skipped_delivered_{0};
  std::atomic<uint64_t> cursor_pub_{1};
  std::atomic<uint64_t> next_read_pub_{1};
  std::atomic<int64_t> oldest_unacked_ms_{0};  // occurred_at of the window's first slot; 0: none

  mutable std::mutex lag_mu_;
  std::vector<double> lags_;  // ring buffer of the last kLagReservoir lags (ms)
  size_t lag_next_ = 0;
};

// ---------------------------------------------------------------------------------------
// Setup and teardown.

absl::Status RelayImpl::Init() {
  // The cursor: the first sequence not yet acknowledged. Without one (a new store), the first
  // event of the journal, or else the writer's next sequence.
  auto stored = store_.Get(Table::kMeta, storage::meta_keys::kRelayCursor);
  if (!stored.ok()) return stored.status();
  auto first = internal::FirstJournalSequence(store_);
  if (!first.ok()) return first.status();
  uint64_t cursor = 1;
  if (stored->has_value()) {
    auto c = storage::DecodeSequence(**stored);
    if (!c) return absl::DataLossError("relay: meta relay_cursor is corrupt");
    cursor = *c;
  } else if (*first) {
    cursor = **first;
  } else {
    auto next = store_.Get(Table::kMeta, storage::meta_keys::kNextSequence);
    if (!next.ok()) return next.status();
    std::optional<uint64_t> n = next->has_value() ? storage::DecodeSequence(**next) : std::nullopt;
    cursor = n.value_or(1);
  }
  window_.Reset(cursor);
  cursor_pub_ = next_read_pub_ = cursor;
  topics_ready_ = !options_.create_topics;
  if (absl::Status s = LoadCredentials(); !s.ok()) return s;
  return MakeProducer();
}

absl::Status RelayImpl::LoadCredentials() {
  if (!options_.security.sasl_password_file.empty()) {
    password_file_ =
        std::make_unique<WatchedFile>(options_.security.sasl_password_file, /*password=*/true);
    if (absl::Status s = password_file_->Load(); !s.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("relay: SASL password file: {}", std::string(s.message())));
    }
    if (password_file_->world_readable()) {
      log_->warn("relay: the SASL password file {} is readable by every user (chmod o-r)",
                 password_file_->path());
    }
    std::lock_guard lock(secret_mu_);
    password_ = password_file_->content();
  }
  if (!options_.security.ssl_ca_file.empty()) {
    ca_file_ = std::make_unique<WatchedFile>(options_.security.ssl_ca_file, /*password=*/false);
    if (absl::Status s = ca_file_->Load(); !s.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("relay: CA file: {}", std::string(s.message())));
    }
  }
  next_credentials_check_ = SteadyClock::now() + milliseconds(options_.credentials_check_ms);
  return absl::OkStatus();
}

bool RelayImpl::CheckCredentials() {
  if (password_file_ == nullptr && ca_file_ == nullptr) return false;
  const auto now = SteadyClock::now();
  if (now < next_credentials_check_) return credentials_changed_;
  next_credentials_check_ = now + milliseconds(options_.credentials_check_ms);
  std::vector<std::string> changed;
  for (WatchedFile* file : {password_file_.get(), ca_file_.get()}) {
    if (file == nullptr) continue;
    std::string error;
    switch (file->Check(&error)) {
      case WatchedFile::Poll::kUnchanged:
        break;
      case WatchedFile::Poll::kUnreadable: {
        uint64_t suppressed = 0;
        if (credentials_read_log_.Allow(&suppressed)) {
          log_->warn("relay: {}; the credentials in use stay ({} similar suppressed)", error,
                     suppressed);
        }
        break;
      }
      case WatchedFile::Poll::kChanged:
        if (file == password_file_.get()) {
          std::lock_guard lock(secret_mu_);
          internal::WipeSecret(password_);
          password_ = file->content();
          changed.push_back(fmt::format("SASL password from {}", file->path()));
        } else {
          changed.push_back(fmt::format("CA certificates from {}", file->path()));
        }
        break;
    }
  }
  if (!changed.empty()) {
    if (!credentials_changed_) swap_deadline_ = now + milliseconds(options_.shutdown_flush_ms);
    credentials_changed_ = true;
    log_->info("relay: new credentials loaded ({}); replacing the kafka producer",
               absl::StrJoin(changed, ", "));
  }
  return credentials_changed_;
}

void RelayImpl::ReplaceProducerForCredentials() {
  ServeKafka();
  CommitAcked(false);
  // Nothing new is produced meanwhile (Run). While Kafka is unreachable (the old credentials
  // refused, say) nothing in flight can be acknowledged: no point in waiting.
  if (outstanding_ > 0 && reachable_.load() && SteadyClock::now() < swap_deadline_) return;
  CommitAcked(true);
  const uint64_t purged = outstanding_;
  DestroyProducer();
  CommitAcked(true);  // reports that came in while purging
  window_.Restart();
  reset_pending_ = false;
  tail_checked_ = false;
  fatal_.store(false);
  credentials_changed_ = false;
  absl::Status s = MakeProducer();
  if (!s.ok()) {
    // The Run loop retries (RecreateProducer) with backoff, and at once when the files change.
    milliseconds delay = recreate_backoff_.Next();
    log_->error("relay: {}; retrying in {} ms", s.ToString(), delay.count());
    resume_at_ = SteadyClock::now() + delay;
    reachable_.store(false);
    return;
  }
  recreate_backoff_.Reset();
  next_probe_at_ = SteadyClock::now();
  log_->info(
      "relay: reconnecting to kafka ({}) with the new credentials; sending from sequence {}{}",
      SecurityDescription(), window_.next_read(),
      purged > 0
          ? fmt::format(" ({} records were still unacknowledged: the tail check skips those that "
                        "arrived)",
                        purged)
          : std::string());
}

std::string RelayImpl::RedactSecret(std::string_view text) const {
  std::lock_guard lock(secret_mu_);
  return internal::Redact(text, password_);
}

std::string RelayImpl::SecurityDescription() const {
  return internal::DescribeKafkaSecurity(options_.security, options_.kafka_properties);
}

absl::StatusOr<internal::ConfHandle> RelayImpl::ClientConf(bool producer) {
  char err[512];
  internal::ConfHandle conf(rd_kafka_conf_new());
  std::vector<std::pair<std::string, std::string>> props = {
      {"bootstrap.servers", options_.brokers},
      {"client.id", options_.client_id},
      // The broker closes idle connections; that is not worth a log line.
      {"log.connection.close", "false"},
      // Reconnect quickly after an outage.
      {"reconnect.backoff.ms", "100"},
      {"reconnect.backoff.max.ms", "2000"},
      {"socket.keepalive.enable", "true"},
  };
  if (producer) {
    props.insert(
        props.end(),
        {
            // Idempotence keeps each partition's order and drops the duplicates of internal
            // retries.
            {"enable.idempotence", "true"},
            {"acks", "all"},
            {"max.in.flight.requests.per.connection", "5"},
            {"compression.type", "lz4"},
            {"linger.ms", "5"},
            {"batch.num.messages", "10000"},
            {"batch.size", "1048576"},
            // Infinite: an outage delays records (retried forever), it never fails them.
            {"message.timeout.ms", "0"},
            // The relay's window is the real bound; librdkafka's queue must hold all of it.
            {"queue.buffering.max.messages",
             fmt::format("{}", std::max<size_t>(100000, options_.max_in_flight))},
            // Same key -> same partition as the Java client (murmur2), for mixed producers.
            {"partitioner", "murmur2_random"},
        });
  }
  for (auto& kv : internal::SecurityProperties(options_.security)) props.push_back(std::move(kv));
  // Both take them (a producer-only one is only a warning for the tail check's consumer).
  for (const auto& [k, v] : options_.kafka_properties) props.emplace_back(k, v);
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf.get(), k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      const bool secret = internal::SecretKafkaProperty(k);
      return absl::InvalidArgumentError(
          fmt::format("relay: kafka property {}={}: {}", k, secret ? "[redacted]" : v,
                      secret ? internal::Redact(err, v) : RedactSecret(err)));
    }
  }
  if (options_.security.sasl()) {
    // Not under the lock in rd_kafka_new: it may log (debug=conf) through OnLog, which takes it.
    std::lock_guard lock(secret_mu_);
    if (rd_kafka_conf_set(conf.get(), "sasl.password", password_.c_str(), err, sizeof err) !=
        RD_KAFKA_CONF_OK) {
      return absl::InvalidArgumentError(
          fmt::format("relay: kafka property sasl.password: {}", internal::Redact(err, password_)));
    }
  }
  rd_kafka_conf_set_log_cb(conf.get(), &RelayImpl::OnLog);
  rd_kafka_conf_set_opaque(conf.get(), this);
  return conf;
}

absl::Status RelayImpl::MakeProducer() {
  char err[512];
  auto made = ClientConf(/*producer=*/true);
  if (!made.ok()) return made.status();
  internal::ConfHandle conf = std::move(*made);
  rd_kafka_conf_set_dr_msg_cb(conf.get(), &RelayImpl::OnDeliveryReport);
  rd_kafka_conf_set_error_cb(conf.get(), &RelayImpl::OnError);
  internal::ProducerHandle rk(rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err));
  if (rk == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("relay: cannot create the kafka producer: {}", RedactSecret(err)));
  }
  (void)conf.release();  // rd_kafka_new owns the configuration once it succeeds
  rk_ = std::move(rk);
  for (int i = 0; i < kTopicKindCount; ++i) {
    const std::string& name = internal::TopicName(options_, static_cast<TopicKind>(i));
    topics_[i].reset(rd_kafka_topic_new(rk_.get(), name.c_str(), nullptr));
    if (topics_[i] == nullptr) {
      std::string why = rd_kafka_err2str(rd_kafka_last_error());
      DestroyProducer();
      return absl::InvalidArgumentError(fmt::format("relay: topic '{}': {}", name, why));
    }
  }
  // Delivery reports and errors land on the main queue: wake the relay thread when it stops
  // being empty, so that it can sleep on one condition variable for Kafka and Notify() alike.
  main_queue_.reset(rd_kafka_queue_get_main(rk_.get()));
  rd_kafka_queue_cb_event_enable(main_queue_.get(), &RelayImpl::OnQueueEvent, this);
  producers_created_.fetch_add(1);
  return absl::OkStatus();
}

void RelayImpl::DestroyProducer() {
  if (rk_ == nullptr) return;
  if (outstanding_ > 0) {
    // Whatever is still queued or in flight is given up here and resent from the outbox later;
    // the purged records come back through their delivery reports, which free their opaques.
    rd_kafka_purge(rk_.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    auto deadline = SteadyClock::now() + kPurgeDrainTimeout;
    while (outstanding_ > 0 && SteadyClock::now() < deadline) rd_kafka_poll(rk_.get(), 50);
    if (outstanding_ > 0) {
      log_->warn("relay: {} purged records did not report back; their opaques are leaked",
                 outstanding_);
    }
    outstanding_ = 0;
  }
  if (main_queue_ != nullptr) rd_kafka_queue_cb_event_enable(main_queue_.get(), nullptr, nullptr);
  main_queue_.reset();
  for (auto& t : topics_) t.reset();
  rk_.reset();
}

void RelayImpl::Start() {
  if (started_ || shut_down_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void RelayImpl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  DestroyProducer();  // the relay thread already did, unless it never ran
  if (started_) {
    log_->info("relay: stopped; {} records delivered since start, outbox cursor {}",
               delivered_.load(), cursor_pub_.load());
  }
}

// ---------------------------------------------------------------------------------------
// Callbacks. Everything but OnLog and OnQueueEvent runs on the relay thread inside
// rd_kafka_poll / rd_kafka_flush. No exception may cross into librdkafka's C code.

void RelayImpl::OnDeliveryReport(rd_kafka_t* rk, const rd_kafka_message_t* msg, void* opaque) {
  std::unique_ptr<Delivery> d(static_cast<Delivery*>(msg->_private));
  auto* self = static_cast<RelayImpl*>(opaque);
  if (self == nullptr || d == nullptr) return;
  try {
    self->HandleDelivery(*msg, *d);
  } catch (const std::exception& e) {
    self->log_->error("relay: delivery report handling failed: {}", e.what());
  } catch (...) {
    self->log_->error("relay: delivery report handling failed");
  }
}

void RelayImpl::OnError(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  auto* self = static_cast<RelayImpl*>(opaque);
  if (self == nullptr) return;
  try {
    self->HandleError(static_cast<rd_kafka_resp_err_t>(err),
                      self->RedactSecret(reason != nullptr ? reason : ""));
  } catch (...) {
  }
}

void RelayImpl::OnLog(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  auto* self = static_cast<RelayImpl*>(rd_kafka_opaque(rk));
  try {
    auto logger = self != nullptr ? self->log_ : internal::BridgeLogger();
    // syslog levels. librdkafka reports transient connection failures as LOG_ERR; they are
    // warnings for us (the relay retries forever and reports reachability itself).
    spdlog::level::level_enum lvl = level <= 2   ? spdlog::level::err
                                    : level <= 4 ? spdlog::level::warn
                                    : level <= 6 ? spdlog::level::info
                                                 : spdlog::level::debug;
    std::string_view text = message != nullptr ? message : "";
    logger->log(lvl, "librdkafka {}: {}", facility != nullptr ? facility : "",
                self != nullptr ? self->RedactSecret(text) : std::string(text));
  } catch (...) {
  }
}

void RelayImpl::OnQueueEvent(rd_kafka_t*, void* opaque) {
  // librdkafka thread; must not call librdkafka. Waking the relay thread is all it does.
  auto* self = static_cast<RelayImpl*>(opaque);
  if (self == nullptr) return;
  try {
    self->Wake();
  } catch (...) {
  }
}

void RelayImpl::HandleDelivery(const rd_kafka_message_t& msg, const Delivery& d) {
  if (outstanding_ > 0) --outstanding_;
  rd_kafka_resp_err_t err = msg.err;
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR &&
      rd_kafka_message_status(&msg) != RD_KAFKA_MSG_STATUS_PERSISTED) {
    err = RD_KAFKA_RESP_ERR__FAIL;  // only a PERSISTED record may leave the outbox
  }
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    delivered_.fetch_add(1, std::memory_order_relaxed);
    SetReachable(true, "a record was acknowledged");
    failure_backoff_.Reset();
    if (d.occurred_at_ms > 0) RecordLag(WallMillis() - d.occurred_at_ms);
    window_.Ack(d.sequence, d.generation);
    return;
  }
  if (err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
    return;  // we purged it (shutdown or new producer); it stays in the outbox
  }
  failed_.fetch_add(1, std::memory_order_relaxed);
  if (err == RD_KAFKA_RESP_ERR__FATAL) fatal_.store(true);
  if (options_.create_topics && UnknownTopicError(err)) topics_ready_ = false;
  uint64_t suppressed = 0;
  if (delivery_error_log_.Allow(&suppressed)) {
    log_->error(
        "relay: delivery of sequence {} to {} failed: {} ({}); resending from sequence {} "
        "({} similar errors suppressed)",
        d.sequence, msg.rkt != nullptr ? rd_kafka_topic_name(msg.rkt) : "?", rd_kafka_err2name(err),
        rd_kafka_err2str(err), window_.acked_through(), suppressed);
  }
  if (d.generation == window_.generation()) reset_pending_ = true;
}

void RelayImpl::HandleError(rd_kafka_resp_err_t err, std::string_view reason) {
  if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__TRANSPORT) {
    SetReachable(false, !reason.empty() ? reason : rd_kafka_err2str(err));
    return;
  }
  uint64_t suppressed = 0;
  if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
    // The broker answered and refused the login: Kafka is not usable by the relay.
    SetReachable(false, "authentication failed");
    if (auth_error_log_.Allow(&suppressed)) {
      log_->error(
          "relay: kafka authentication failed at {} ({}): {}; events stay in the outbox{} ({} "
          "similar suppressed)",
          options_.brokers, SecurityDescription(), reason,
          password_file_ != nullptr
              ? fmt::format(" until the password in {} is right (re-read when it changes)",
                            password_file_->path())
              : std::string(),
          suppressed);
    }
    return;
  }
  if (err == RD_KAFKA_RESP_ERR__SSL) {
    SetReachable(false, "TLS handshake failed");
    if (tls_error_log_.Allow(&suppressed)) {
      log_->error(
          "relay: TLS with kafka at {} failed ({}): {}; events stay in the outbox ({} similar "
          "suppressed)",
          options_.brokers, SecurityDescription(), reason, suppressed);
    }
    return;
  }
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    fatal_.store(true);
    log_->critical("relay: fatal kafka producer error: {}", reason);
    return;
  }
  if (kafka_error_log_.Allow(&suppressed)) {
    log_->warn("relay: kafka error {}: {} ({} similar suppressed)", rd_kafka_err2name(err), reason,
               suppressed);
  }
}

void RelayImpl::SetReachable(bool reachable, std::string_view why) {
  if (reachable_.exchange(reachable) == reachable) return;
  if (reachable) {
    log_->info("relay: kafka is reachable ({})", why);
  } else {
    log_->warn("relay: kafka is unreachable ({}); events stay in the outbox until it is back", why);
  }
}

void RelayImpl::RecordLag(int64_t lag_ms) {
  std::lock_guard lock(lag_mu_);
  double v = static_cast<double>(std::max<int64_t>(0, lag_ms));
  if (lags_.size() < kLagReservoir) {
    lags_.push_back(v);
  } else {
    lags_[lag_next_] = v;
    lag_next_ = (lag_next_ + 1) % kLagReservoir;
  }
}

// ---------------------------------------------------------------------------------------
// The relay thread.

void RelayImpl::Run() {
  pthread_setname_np(pthread_self(), "feed-relay");
  log_->info("relay: started at sequence {} (brokers {}, {})", window_.cursor(), options_.brokers,
             SecurityDescription());
  while (!StopRequested()) {
    auto now = SteadyClock::now();
    if (inject_fatal_.exchange(false) && rk_ != nullptr) {
      rd_kafka_test_fatal_error(rk_.get(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                                "injected by a test");
    }
    const bool new_credentials = CheckCredentials();
    if (rk_ != nullptr) ServeKafka();
    if (fatal_.load() || rk_ == nullptr) {
      if (now >= resume_at_ || (rk_ == nullptr && new_credentials)) RecreateProducer();
    } else if (new_credentials) {
      ReplaceProducerForCredentials();
    } else if (!topics_ready_) {
      if (now >= next_topic_attempt_) EnsureTopics();
    } else if (!tail_checked_) {
      if (now >= next_tail_check_) CheckTail();
    } else {
      if (reset_pending_ && outstanding_ == 0) FinishReset();
      if (!reset_pending_ && SteadyClock::now() >= resume_at_) FillWindow();
      ServeKafka();
      CommitAcked(false);
      MaybeProbe();
    }
    next_read_pub_.store(window_.next_read(), std::memory_order_relaxed);
    WaitForWork();
  }
  StopProducing();
}

void RelayImpl::WaitForWork() {
  auto now = SteadyClock::now();
  milliseconds timeout(options_.idle_poll_ms);
  auto until = [&](SteadyClock::time_point t) {
    auto left = std::chrono::ceil<milliseconds>(t - now);
    timeout = std::min(timeout, std::max(left, milliseconds(0)));
  };
  if (commit_pending_) timeout = std::min(timeout, kCommitInterval);
  if (resume_at_ > now) until(resume_at_);
  if (!topics_ready_) until(next_topic_attempt_);
  if (topics_ready_ && !tail_checked_) until(next_tail_check_);
  if (!reachable_.load()) until(next_probe_at_);
  if (password_file_ != nullptr || ca_file_ != nullptr) until(next_credentials_check_);
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return wake_ || StopRequested(); });
  wake_ = false;
}

void RelayImpl::ServeKafka() {
  // Drain the main queue completely: its wake-up callback fires only when it turns non-empty.
  for (int i = 0; i < 10000; ++i) {
    if (rd_kafka_poll(rk_.get(), 0) == 0) return;
  }
  Wake();  // still busy: come back at once
}

void RelayImpl::EnsureTopics() {
  next_topic_attempt_ = SteadyClock::now() + topic_backoff_.Next();
  internal::TopicsRequest request;
  for (int i = 0; i < kTopicKindCount; ++i) {
    const std::string& n = internal::TopicName(options_, static_cast<TopicKind>(i));
    if (std::find(request.names.begin(), request.names.end(), n) == request.names.end()) {
      request.names.push_back(n);
    }
  }
  request.partitions = options_.partitions;
  request.replication_factor = options_.replication_factor;
  request.timeout_ms = kAdminTimeoutMs;
  const internal::TopicsOutcome outcome = internal::CreateTopics(
      rk_.get(), request, [this] { ServeKafka(); },
      // New credentials: this producer is about to go; do not wait for its answer.
      [this] { return StopRequested() || CheckCredentials(); }, *log_, topic_error_log_);
  if (outcome.answered) SetReachable(true, "admin request answered");
  if (outcome.ready) {
    topics_ready_ = true;
    topic_backoff_.Reset();
  }
}

void RelayImpl::CheckTail() {
  delivered_ids_.clear();
  if (!options_.skip_delivered) {
    tail_checked_ = true;
    return;
  }
  // The commit time of the first event to send: every record of it and of the later ones is
  // timestamped at or after it (minus the margin, for a wall clock that stepped back).
  auto first_ms = internal::FirstEventTime(store_, window_.next_read());
  if (first_ms.ok() && !first_ms->has_value()) {
    tail_checked_ = true;  // nothing to send yet: nothing can be in Kafka either
    return;
  }
  const auto began = SteadyClock::now();
  absl::StatusOr<internal::TailCheckResult> found = absl::UnknownError("not read");
  if (!first_ms.ok()) {
    found = first_ms.status();
  } else {
    auto conf = ClientConf(/*producer=*/false);
    if (!conf.ok()) {
      found = conf.status();
    } else {
      internal::TailCheckRequest request;
      request.conf = std::move(*conf);
      for (int i = 0; i < kTopicKindCount; ++i) {
        const std::string& n = internal::TopicName(options_, static_cast<TopicKind>(i));
        if (std::find(request.topics.begin(), request.topics.end(), n) == request.topics.end()) {
          request.topics.push_back(n);
        }
      }
      request.since_ms = std::max<int64_t>(0, **first_ms - options_.tail_check_margin_ms);
      request.timeout_ms = options_.tail_check_timeout_ms;
      found = internal::ReadDeliveredIds(std::move(request));
    }
  }
  if (!found.ok()) {
    const milliseconds delay = tail_check_backoff_.Next();
    next_tail_check_ = SteadyClock::now() + delay;
    uint64_t suppressed = 0;
    if (tail_check_log_.Allow(&suppressed)) {
      log_->warn(
          "relay: cannot tell which events from sequence {} are in kafka already ({}); nothing "
          "is sent before it can, retrying in {} ms ({} similar suppressed)",
          window_.next_read(), found.status().ToString(), delay.count(), suppressed);
    }
    return;
  }
  tail_check_backoff_.Reset();
  SetReachable(true, "the tail check read the topics");
  tail_checked_ = true;
  delivered_ids_ = std::move(found->ids);
  log_->info(
      "relay: tail check from sequence {}: {} records in {} partitions read in {} ms, {} distinct "
      "event ids; those of the events to send are not sent again",
      window_.next_read(), found->records, found->partitions,
      std::chrono::duration_cast<milliseconds>(SteadyClock::now() - began).count(),
      delivered_ids_.size());
}

void RelayImpl::FillWindow() {
  if (window_.in_flight() >= options_.max_in_flight) return;
  size_t budget = std::min(options_.read_batch, options_.max_in_flight - window_.in_flight());
  internal::JournalVisitor visitor;
  visitor.event = [&](uint64_t sequence, std::string_view bytes) {
    if (sequence != window_.next_read()) {
      // Cannot happen through the writer (entries are gap-free); say so if it does.
      uint64_t suppressed = 0;
      if (event_warning_log_.Allow(&suppressed)) {
        log_->error("relay: the journal skips from sequence {} to {}; sending on from {}",
                    window_.next_read(), sequence, sequence);
      }
      while (window_.next_read() < sequence) window_.Produced(window_.next_read(), 0, true);
    }
    if (!Produce(sequence, bytes)) return false;
    return --budget > 0;
  };
  visitor.corrupt = [&](uint64_t last_sequence, std::string_view why) {
    // The one case where sequences are skipped rather than retried: bytes that are not a
    // journal entry have no events to send, retrying cannot change that, and holding them
    // back would stop every later event forever. The writer never stores such bytes, so this
    // means corruption; it is logged with its sequences and counted in stats.failed.
    failed_.fetch_add(1, std::memory_order_relaxed);
    if (last_sequence < window_.next_read()) {
      log_->error("relay: a journal key is not a sequence ({}); ignored", why);
      return true;
    }
    log_->error("relay: journal entry {} is corrupt ({}); sequences {}..{} skipped", last_sequence,
                why, window_.next_read(), last_sequence);
    while (window_.next_read() <= last_sequence) window_.Produced(window_.next_read(), 0, true);
    return true;
  };
  absl::Status s = internal::ReadJournal(store_, window_.next_read(), visitor);
  if (!s.ok()) {
    uint64_t suppressed = 0;
    if (scan_error_log_.Allow(&suppressed)) {
      log_->error("relay: journal read failed: {}; retrying", s.ToString());
    }
    resume_at_ = SteadyClock::now() + failure_backoff_.Next();
  }
}

// Produces the event at `sequence` (its stored bytes); false when it could not be handed to
// librdkafka (the read stops and the event is read again later).
bool RelayImpl::Produce(uint64_t sequence, std::string_view stored) {
  events::v1::Event event;
  if (!event.ParseFromArray(stored.data(), static_cast<int>(stored.size()))) {
    // Bytes that do not parse as an Event have no key, topic or event_id: as with a corrupt
    // journal entry, the event is skipped (logged, counted in stats.failed).
    failed_.fetch_add(1, std::memory_order_relaxed);
    log_->error("relay: journal event {} ({} bytes) is not an events.v1.Event; skipped", sequence,
                stored.size());
    window_.Produced(sequence, 0, /*acked=*/true);
    return true;
  }
  uint64_t suppressed = 0;
  if (event.sequence() != sequence && event_warning_log_.Allow(&suppressed)) {
    log_->warn("relay: journal event {} holds the sequence {}; sent as {}", sequence,
               event.sequence(), sequence);
  }
  if (!delivered_ids_.empty() && delivered_ids_.erase(event.event_id()) > 0) {
    // Already in Kafka (the tail check read it): acknowledged without sending it again.
    skipped_delivered_.fetch_add(1, std::memory_order_relaxed);
    window_.Produced(sequence, 0, /*acked=*/true);
    return true;
  }
  Record r = internal::BuildRecord(event, sequence, stored, options_);
  if (!r.routed && event_warning_log_.Allow(&suppressed)) {
    log_->warn("relay: event {} (type '{}') has no known payload; sent to the stock topic",
               sequence, event.type());
  }
  internal::HeadersHandle headers(rd_kafka_headers_new(r.headers.size()));
  for (const auto& [name, value] : r.headers) {
    rd_kafka_header_add(headers.get(), name.data(), static_cast<ssize_t>(name.size()), value.data(),
                        static_cast<ssize_t>(value.size()));
  }
  auto d = std::make_unique<Delivery>(sequence, r.occurred_at_ms, window_.generation());
  rd_kafka_resp_err_t err = rd_kafka_producev(
      rk_.get(), RD_KAFKA_V_RKT(topics_[static_cast<int>(r.topic)].get()),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_KEY(r.key.empty() ? nullptr : r.key.data(), r.key.size()),
      RD_KAFKA_V_VALUE(r.value.data(), r.value.size()), RD_KAFKA_V_HEADERS(headers.get()),
      // The event's commit time: what the tail check finds records by.
      RD_KAFKA_V_TIMESTAMP(r.occurred_at_ms > 0 ? r.occurred_at_ms : 0), RD_KAFKA_V_OPAQUE(d.get()),
      RD_KAFKA_V_END);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    // librdkafka owns both now; the delivery report frees the opaque.
    (void)headers.release();
    (void)d.release();
    ++outstanding_;
    window_.Produced(sequence, r.occurred_at_ms);
    return true;
  }
  // Not accepted: librdkafka took neither the headers nor the opaque (freed here).
  if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
    // Only with a user queue.buffering.max.messages below max_in_flight: wait for reports.
    if (outstanding_ == 0) resume_at_ = SteadyClock::now() + milliseconds(10);
    return false;
  }
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    fatal_.store(true);
    return false;
  }
  // Permanent for this record (e.g. larger than message.max.bytes): it cannot be skipped, so
  // the relay retries it with backoff and stops there until it goes through.
  failed_.fetch_add(1, std::memory_order_relaxed);
  if (options_.create_topics && UnknownTopicError(err)) topics_ready_ = false;
  if (produce_error_log_.Allow(&suppressed)) {
    log_->error(
        "relay: cannot produce sequence {} ({} bytes) to {}: {}; retrying ({} similar "
        "suppressed)",
        sequence, r.value.size(), internal::TopicName(options_, r.topic), rd_kafka_err2str(err),
        suppressed);
  }
  resume_at_ = SteadyClock::now() + failure_backoff_.Next();
  return false;
}

void RelayImpl::CommitAcked(bool force) {
  const std::optional<OutboxWindow::Range> acked = window_.AckedPrefix();
  oldest_unacked_ms_.store(window_.oldest_unacked_ms(), std::memory_order_relaxed);
  if (!acked) {
    commit_pending_ = false;
    return;
  }
  auto now = SteadyClock::now();
  if (!force && window_.in_flight() > 0 && now - last_commit_ < kCommitInterval) {
    commit_pending_ = true;
    return;
  }
  // Only the cursor: the core's checkpointer deletes the journal entries below it once they
  // are checkpointed too.
  auto group = store_.NewWriteGroup();
  group->Put(Table::kMeta, storage::meta_keys::kRelayCursor, storage::EncodeSequence(acked->until));
  absl::Status s = store_.Commit(*group, storage::CommitMode::kNoSync);
  last_commit_ = now;
  if (!s.ok()) {
    commit_pending_ = true;
    uint64_t suppressed = 0;
    if (commit_error_log_.Allow(&suppressed)) {
      log_->error("relay: cannot store the relay cursor: {}; retrying", s.ToString());
    }
    return;
  }
  window_.Committed(acked->until);
  cursor_pub_.store(acked->until, std::memory_order_relaxed);
  commit_pending_ = false;
}

void RelayImpl::FinishReset() {
  // Every record of the failed window has reported back; keep what was acknowledged in order
  // and resend the rest. Records after the failed one that did get through are sent again
  // (consumers deduplicate by event_id); skipping them would reorder their keys.
  CommitAcked(true);
  window_.Restart();
  reset_pending_ = false;
  tail_checked_ = false;  // what got through after the failed record is not sent twice
  milliseconds delay = failure_backoff_.Next();
  resume_at_ = SteadyClock::now() + delay;
  log_->warn("relay: resending from sequence {} in {} ms", window_.next_read(), delay.count());
}

void RelayImpl::RecreateProducer() {
  if (rk_ != nullptr) {
    char reason[512] = "";
    rd_kafka_resp_err_t err = rd_kafka_fatal_error(rk_.get(), reason, sizeof reason);
    ServeKafka();
    CommitAcked(true);
    log_->critical(
        "relay: the kafka producer failed fatally ({}: {}); recreating it and resending from "
        "sequence {} (after a tail check: what arrived is not sent twice)",
        rd_kafka_err2name(err), reason, window_.acked_through());
    DestroyProducer();
    CommitAcked(true);  // reports that came in while purging
  }
  window_.Restart();
  reset_pending_ = false;
  tail_checked_ = false;
  fatal_.store(false);
  reachable_.store(false);
  credentials_changed_ = false;  // the new producer reads the current files
  absl::Status s = MakeProducer();
  if (!s.ok()) {
    milliseconds delay = recreate_backoff_.Next();
    log_->error("relay: {}; retrying in {} ms", s.ToString(), delay.count());
    resume_at_ = SteadyClock::now() + delay;
    return;
  }
  recreate_backoff_.Reset();
  next_probe_at_ = SteadyClock::now();
}

void RelayImpl::MaybeProbe() {
  if (reachable_.load()) return;
  auto now = SteadyClock::now();
  if (now < next_probe_at_) return;
  next_probe_at_ = now + kProbeInterval;
  // Blocks this thread up to kProbeTimeoutMs; only while the broker looks unreachable.
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk_.get(), 0, nullptr, &md, kProbeTimeoutMs) ==
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    internal::MetadataHandle owned(md);
    if (owned->broker_cnt > 0) SetReachable(true, "metadata request answered");
  }
}

void RelayImpl::StopProducing() {
  if (rk_ == nullptr) return;
  ServeKafka();
  // No new entries are read from here on. Give what is in flight shutdown_flush_ms to be
  // acknowledged, deleting acknowledged entries as they come.
  auto deadline = SteadyClock::now() + milliseconds(options_.shutdown_flush_ms);
  while (outstanding_ > 0) {
    auto left = std::chrono::ceil<milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) break;
    rd_kafka_flush(rk_.get(), static_cast<int>(std::min<int64_t>(100, left.count())));
    CommitAcked(false);
  }
  CommitAcked(true);
  uint64_t left = outstanding_;
  DestroyProducer();
  CommitAcked(true);
  if (left > 0) {
    log_->info("relay: {} records unacknowledged at shutdown stay in the outbox from sequence {}",
               left, window_.acked_through());
  }
}

absl::StatusOr<ReplayResult> RelayImpl::Replay(const ReplayRequest& request) {
  if (request.from_sequence == 0) {
    return absl::InvalidArgumentError("from_sequence: must be 1 or more");
  }
  if (request.to_sequence != 0 && request.to_sequence < request.from_sequence) {
    return absl::InvalidArgumentError(fmt::format("to_sequence: {} is before from_sequence {}",
                                                  request.to_sequence, request.from_sequence));
  }
  if (request.max_records_per_second == 0 || request.max_records_per_second > 1'000'000) {
    return absl::InvalidArgumentError("max_records_per_second: 1 to 1000000");
  }
  if (!request.topic.empty()) {
    bool known = false;
    for (int i = 0; i < kTopicKindCount; ++i) {
      known |= internal::TopicName(options_, static_cast<TopicKind>(i)) == request.topic;
    }
    if (!known) {
      return absl::InvalidArgumentError(
          fmt::format("topic: '{}' is not one of the relay's topics ({}, {}, {})", request.topic,
                      options_.stock_topic, options_.order_status_topic, options_.receipt_topic));
    }
  }
  auto first = internal::FirstJournalSequence(store_);
  if (!first.ok()) return first.status();
  const uint64_t last = last_sequence_ ? last_sequence_() : 0;
  if (!first->has_value() || (last_sequence_ && **first > last)) {
    return absl::OutOfRangeError(
        "from_sequence: no event is kept (see --event-retention-ms and --event-retention-bytes)");
  }
  if (request.from_sequence < **first) {
    return absl::OutOfRangeError(
        fmt::format("from_sequence: {} is no longer kept; the oldest sequence kept is {}",
                    request.from_sequence, **first));
  }
  uint64_t to = request.to_sequence != 0 ? request.to_sequence : UINT64_MAX;
  if (last_sequence_) to = std::min(to, last);
  if (request.from_sequence > to) {
    return absl::OutOfRangeError(fmt::format(
        "from_sequence: {} is after the last committed sequence {}", request.from_sequence, last));
  }
  auto conf = ClientConf(/*producer=*/true);
  if (!conf.ok()) return conf.status();
  internal::ReplayPlan plan;
  plan.conf = std::move(*conf);
  plan.from = request.from_sequence;
  plan.to = to;
  plan.topic = request.topic;
  plan.max_records_per_second = request.max_records_per_second;
  plan.flush_timeout_ms = request.flush_timeout_ms;
  log_->info("relay: replaying sequences {}..{}{} at most {}/s", plan.from,
             to == UINT64_MAX ? std::string("the end") : std::to_string(to),
             request.topic.empty() ? std::string() : " of topic " + request.topic,
             request.max_records_per_second);
  auto result = internal::RunReplay(std::move(plan), store_, options_);
  if (result.ok()) {
    log_->info("relay: replay of {}..{} done: {} records sent and acknowledged",
               result->first_sequence, result->last_sequence, result->records_delivered);
  }
  return result;
}

RelayStats RelayImpl::stats() const {
  RelayStats s;
  s.delivered = delivered_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  s.skipped_delivered = skipped_delivered_.load(std::memory_order_relaxed);
  s.kafka_reachable = reachable_.load(std::memory_order_relaxed);
  s.next_sequence_to_send = next_read_pub_.load(std::memory_order_relaxed);
  uint64_t cursor = cursor_pub_.load(std::memory_order_relaxed);

  if (last_sequence_) {
    const uint64_t last = last_sequence_();
    s.outbox_depth = last >= cursor ? last - cursor + 1 : 0;
  } else {
    // No writer to ask (a store filled by other means): count.
    internal::JournalVisitor count;
    count.event = [&](uint64_t, std::string_view) {
      ++s.outbox_depth;
      return true;
    };
    count.corrupt = [](uint64_t, std::string_view) { return true; };
    (void)internal::ReadJournal(store_, cursor, count);
  }
  if (s.outbox_depth > 0) {
    int64_t oldest = oldest_unacked_ms_.load(std::memory_order_relaxed);
    if (oldest == 0) {
      auto first = internal::FirstEventTime(store_, cursor);
      if (first.ok() && first->has_value()) oldest = **first;
    }
    if (oldest > 0) s.oldest_undelivered_age_ms = std::max<int64_t>(0, WallMillis() - oldest);
  }

  std::vector<double> lags;
  {
    std::lock_guard lock(lag_mu_);
    lags = lags_;
  }
  if (!lags.empty()) {
    auto pct = [&](double p) {
      size_t i =
          std::min(lags.size() - 1, static_cast<size_t>(p * static_cast<double>(lags.size())));
      std::nth_element(lags.begin(), lags.begin() + static_cast<std::ptrdiff_t>(i), lags.end());
      return lags[i];
    };
    s.lag_p50_ms = pct(0.50);
    s.lag_p99_ms = pct(0.99);
  }
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Relay>> Relay::Create(storage::Store& store,
                                                     const RelayOptions& options,
                                                     std::function<uint64_t()> last_sequence) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  auto relay = std::make_unique<RelayImpl>(store, options, std::move(last_sequence));
  if (absl::Status s = relay->Init(); !s.ok()) return s;
  return std::unique_ptr<Relay>(std::move(relay));
}

namespace testing {

void InjectFatalError(Relay& relay) {
  if (auto* impl = dynamic_cast<RelayImpl*>(&relay)) impl->InjectFatalError();
}

int ProducersCreated(const Relay& relay) {
  auto* impl = dynamic_cast<const RelayImpl*>(&relay);
  return impl != nullptr ? impl->producers_created() : 0;
}

int64_t LiveDeliveries() { return g_live_deliveries.load(); }

}  // namespace testing
}  // namespace feed::bridge

#include "server/feed_server.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "bridge/relay.h"
#include "core/history.h"
#include "fmt/format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "heap_stats.h"
#include "prometheus/exposer.h"
#include "server/observability.h"
#include "server/services.h"
#include "spdlog/spdlog.h"
#include "storage/rocksdb_store.h"

namespace feed::server {

// Service name under which the Kafka relay reports its health (NOT_SERVING while Kafka is
// unreachable); the main services stay SERVING meanwhile.
constexpr const char* kBridgeHealthName = "feed.bridge.KafkaRelay";

namespace {

// Wakes the relay when the writer publishes events.
class RelayWaker : public core::ChangeListener {
 public:
  explicit RelayWaker(bridge::Relay* relay) : relay_(relay) {}
  void OnEvents(const std::vector<core::EventPtr>&) override { relay_->Notify(); }

 private:
  bridge::Relay* relay_;
};

}  // namespace

class FeedServer::Impl {
 public:
  explicit Impl(const ServerConfig& config)
      : config_(config), streams_(static_cast<size_t>(config.max_open_streams)) {}

  absl::Status Start();
  void Shutdown();
  void Housekeeping();

  ServerConfig config_;
  Metrics metrics_;
  StreamRegistry streams_;
  LogRateLimit bad_request_log_{std::chrono::seconds(1)};
  core::SystemClock clock_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<core::InventoryCore> core_;
  std::unique_ptr<bridge::Relay> relay_;
  std::unique_ptr<RelayWaker> waker_;
  std::unique_ptr<InventoryServiceImpl> inventory_service_;
  std::unique_ptr<OrderServiceImpl> order_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool shut_down_ = false;
  std::thread housekeeping_;
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* unpublished_events_ = nullptr;
  prometheus::Gauge* open_holds_ = nullptr;
  prometheus::Gauge* last_sequence_ = nullptr;
  prometheus::Gauge* outbox_depth_ = nullptr;
  prometheus::Gauge* outbox_oldest_age_ = nullptr;
  prometheus::Gauge* kafka_delivered_ = nullptr;
  prometheus::Gauge* kafka_failed_ = nullptr;
  prometheus::Gauge* kafka_up_ = nullptr;
  prometheus::Gauge* kafka_lag_p50_ = nullptr;
  prometheus::Gauge* kafka_lag_p99_ = nullptr;
  prometheus::Gauge* rocksdb_memtables_ = nullptr;
  prometheus::Gauge* rocksdb_block_cache_ = nullptr;
  prometheus::Gauge* rocksdb_table_readers_ = nullptr;
  prometheus::Gauge* heap_allocated_ = nullptr;
  prometheus::Gauge* heap_free_ = nullptr;
  prometheus::Gauge* heap_cached_ = nullptr;
  prometheus::Counter* heap_releases_ = nullptr;
};

absl::Status FeedServer::Impl::Start() {
  storage::RocksDbOptions so;
  so.path = config_.data_dir;
  so.durability = config_.durability;
  so.idempotency_retention_ms = config_.core.idempotency_retention_ms;
  so.history_expired = [retention_ms = config_.core.history_retention_ms](
                           storage::Table table, std::string_view value, int64_t now_ms) {
    return core::HistoryExpired(table, value, now_ms, retention_ms);
  };
  so.memtable_budget_bytes = static_cast<size_t>(config_.rocksdb_memtable_mb) << 20;
  so.block_cache_bytes = static_cast<size_t>(config_.rocksdb_block_cache_mb) << 20;
  so.defer_compactions = true;  // InventoryCore::Open starts them once recovered
  auto store = storage::OpenRocksDbStore(so);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);

  core::CoreOptions co = config_.core;
  co.on_batch_committed = [this](size_t commands, size_t events, double seconds) {
    metrics_.ObserveBatch(commands, events, seconds);
  };
  auto core = core::InventoryCore::Open(*store_, clock_, co);
  if (!core.ok()) return core.status();
  core_ = std::move(*core);

  if (!config_.kafka.brokers.empty()) {
    bridge::RelayOptions ro;
    const auto& k = config_.kafka;
    ro.brokers = k.brokers;
    ro.stock_topic = k.stock_topic;
    ro.order_status_topic = k.order_status_topic;
    ro.receipt_topic = k.receipt_topic;
    ro.partitions = k.partitions;
    ro.replication_factor = k.replication_factor;
    ro.create_topics = k.create_topics;
    ro.json_values = k.value_format == "json";
    ro.ce_source = k.ce_source;
    ro.kafka_properties = k.properties;
    ro.shutdown_flush_ms = k.shutdown_flush_ms;
    auto relay = bridge::Relay::Create(*store_, ro);
    if (!relay.ok()) return relay.status();
    relay_ = std::move(*relay);
    waker_ = std::make_unique<RelayWaker>(relay_.get());
    core_->change_feed().Subscribe(waker_.get(), UINT64_MAX);
    relay_->Start();
  }

  ServiceContext sc{core_.get(), &metrics_, &config_, &streams_, &bad_request_log_};
  inventory_service_ = std::make_unique<InventoryServiceImpl>(sc);
  order_service_ = std::make_unique<OrderServiceImpl>(sc);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config_.listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(inventory_service_.get());
  builder.RegisterService(order_service_.get());
  builder.SetMaxReceiveMessageSize(config_.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             config_.max_concurrent_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(config_.keepalive_time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(config_.keepalive_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(config_.keepalive_min_client_ping_interval_ms));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  if (config_.max_connection_idle_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(config_.max_connection_idle_ms));
  }
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(config_.handshake_timeout_ms));
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    return absl::UnavailableError(fmt::format("cannot listen on {} (address in use or invalid)", config_.listen));
  }
  auto colon = config_.listen.rfind(':');
  address_ = fmt::format("{}:{}", config_.listen.substr(0, colon), port);

  auto* health = server_->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus("inventory.v1.InventoryService", true);
  health->SetServingStatus("order.v1.OrderService", true);
  health->SetServingStatus(kBridgeHealthName, relay_ && relay_->kafka_reachable());

  if (!config_.metrics_listen.empty()) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(config_.metrics_listen);
      exposer_->RegisterCollectable(metrics_.registry());
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          fmt::format("cannot serve metrics on {}: {}", config_.metrics_listen, e.what()));
    }
  }
  auto& gauge = prometheus::BuildGauge().Name("feed_state").Help("Core and relay state").Register(
      *metrics_.registry());
  queue_depth_ = &gauge.Add({{"what", "writer_queue_depth"}});
  unpublished_events_ = &gauge.Add({{"what", "unpublished_events"}});
  open_holds_ = &gauge.Add({{"what", "open_holds"}});
  last_sequence_ = &gauge.Add({{"what", "last_sequence"}});
  outbox_depth_ = &gauge.Add({{"what", "outbox_depth"}});
  outbox_oldest_age_ = &gauge.Add({{"what", "outbox_oldest_age_seconds"}});
  kafka_delivered_ = &gauge.Add({{"what", "kafka_delivered"}});
  kafka_failed_ = &gauge.Add({{"what", "kafka_failed"}});
  kafka_up_ = &gauge.Add({{"what", "kafka_reachable"}});
  kafka_lag_p50_ = &gauge.Add({{"what", "kafka_commit_to_ack_p50_ms"}});
  kafka_lag_p99_ = &gauge.Add({{"what", "kafka_commit_to_ack_p99_ms"}});
  rocksdb_memtables_ = &gauge.Add({{"what", "rocksdb_memtables_bytes"}});
  rocksdb_block_cache_ = &gauge.Add({{"what", "rocksdb_block_cache_bytes"}});
  rocksdb_table_readers_ = &gauge.Add({{"what", "rocksdb_table_readers_bytes"}});
  heap_allocated_ = &gauge.Add({{"what", "heap_allocated_bytes"}});
  heap_free_ = &gauge.Add({{"what", "heap_free_bytes"}});
  heap_cached_ = &gauge.Add({{"what", "heap_cached_bytes"}});
  heap_releases_ = &prometheus::BuildCounter()
                        .Name("feed_heap_releases_total")
                        .Help("times free heap pages went back to the OS (--max-free-heap-mb)")
                        .Register(*metrics_.registry())
                        .Add({});
  if (config_.max_free_heap_mb > 0) {
    LimitThreadCaches(static_cast<size_t>(config_.max_free_heap_mb) << 20);
  }
  housekeeping_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "feed-housekeep");
    Housekeeping();
  });
  spdlog::info("feed-server: listening on {} (durability {}, data {}){}{}", address_,
               config_.durability == storage::Durability::kSync ? "sync" : "async",
               config_.data_dir,
               config_.metrics_listen.empty() ? "" : ", metrics on http://" + config_.metrics_listen + "/metrics",
               relay_ ? ", relaying to Kafka at " + config_.kafka.brokers : ", Kafka relay off");
  return absl::OkStatus();
}

// Once a second: gauges and the bridge's health status.
void FeedServer::Impl::Housekeeping() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    auto s = core_->stats();
    queue_depth_->Set(static_cast<double>(s.queue_depth));
    unpublished_events_->Set(static_cast<double>(s.unpublished_events));
    open_holds_->Set(static_cast<double>(s.held_reservations));
    last_sequence_->Set(static_cast<double>(s.last_sequence));
    auto mem = store_->memory_usage();
    rocksdb_memtables_->Set(static_cast<double>(mem.memtables_bytes));
    rocksdb_block_cache_->Set(static_cast<double>(mem.block_cache_bytes));
    rocksdb_table_readers_->Set(static_cast<double>(mem.table_readers_bytes));
    HeapStats heap = ReadHeapStats();
    if (config_.max_free_heap_mb > 0 &&
        heap.free_bytes > static_cast<size_t>(config_.max_free_heap_mb) << 20) {
      ReleaseFreeHeap();
      heap_releases_->Increment();
      heap = ReadHeapStats();
    }
    heap_allocated_->Set(static_cast<double>(heap.allocated_bytes));
    heap_free_->Set(static_cast<double>(heap.free_bytes));
    heap_cached_->Set(static_cast<double>(heap.cached_bytes));
    if (relay_) {
      auto r = relay_->stats();
      outbox_depth_->Set(static_cast<double>(r.outbox_depth));
      outbox_oldest_age_->Set(static_cast<double>(r.oldest_undelivered_age_ms) / 1000.0);
      kafka_delivered_->Set(static_cast<double>(r.delivered));
      kafka_failed_->Set(static_cast<double>(r.failed));
      kafka_up_->Set(r.kafka_reachable ? 1 : 0);
      kafka_lag_p50_->Set(r.lag_p50_ms);
      kafka_lag_p99_->Set(r.lag_p99_ms);
      server_->GetHealthCheckService()->SetServingStatus(kBridgeHealthName, r.kafka_reachable);
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
  }
}

void FeedServer::Impl::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  spdlog::info("feed-server: shutting down (grace {} ms)", config_.shutdown_grace_ms);
  if (server_) {
    // NOT_SERVING for every service (SetServingStatus would be undone by Shutdown anyway).
    server_->GetHealthCheckService()->Shutdown();
    streams_.CloseAll(absl::UnavailableError("the server is shutting down"));
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(config_.shutdown_grace_ms));
    server_->Wait();
  }
  if (core_) core_->Shutdown();
  if (relay_) {
    core_->change_feed().Unsubscribe(waker_.get());
    relay_->Shutdown();
  }
  exposer_.reset();
  server_.reset();
  relay_.reset();
  core_.reset();
  store_.reset();  // syncs the WAL and closes RocksDB
  spdlog::info("feed-server: stopped");
}

FeedServer::FeedServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FeedServer::~FeedServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<FeedServer>> FeedServer::Start(const ServerConfig& config) {
  auto impl = std::make_unique<Impl>(config);
  if (absl::Status s = impl->Start(); !s.ok()) {
    impl->Shutdown();
    return s;
  }
  return std::unique_ptr<FeedServer>(new FeedServer(std::move(impl)));
}

void FeedServer::Shutdown() { impl_->Shutdown(); }
const std::string& FeedServer::address() const { return impl_->address_; }
core::InventoryCore& FeedServer::core() { return *impl_->core_; }

}  // namespace feed::server

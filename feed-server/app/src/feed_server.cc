#include "app/feed_server.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "admin/backup.h"
#include "bridge/relay.h"
#include "core/format_migration.h"
#include "core/history.h"
#include "fmt/format.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "heap_stats.h"
#include "http/gateway.h"
#include "security/authorizer.h"
#include "security/tls_files.h"
#include "server/logging.h"
#include "server/observability.h"
#include "server/operations.h"
#include "server/services.h"
#include "server_setup.h"
#include "server_status.h"
#include "state_gauges.h"
#include "storage/rocksdb_store.h"

namespace feed::server {

// Service name under which the Kafka relay reports its health (NOT_SERVING while Kafka is
// unreachable); the main services stay SERVING meanwhile.
constexpr const char* kBridgeHealthName = "feed.bridge.KafkaRelay";

namespace {

// Wakes the relay when the core publishes events (on feed-publisher).
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
  ServerStatus Status() { return CollectStatus(*core_, relay_.get()); }
  HeapStats TrimHeap();

  ServerConfig config_;
  Metrics metrics_;
  StreamRegistry streams_;
  std::unique_ptr<AccessLog> access_log_;
  LogRateLimit bad_request_log_{std::chrono::seconds(1)};
  core::SystemClock clock_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<core::InventoryCore> core_;
  std::unique_ptr<bridge::Relay> relay_;
  std::unique_ptr<RelayWaker> waker_;
  std::unique_ptr<InventoryServiceImpl> inventory_service_;
  std::unique_ptr<OrderServiceImpl> order_service_;
  std::unique_ptr<admin::StoreOperations> store_operations_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<http::Gateway> gateway_;
  MetricsEndpoint metrics_endpoint_;
  GrpcSecurity security_;
  std::string address_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool shut_down_ = false;
  std::thread housekeeping_;
  std::unique_ptr<StateGauges> gauges_;
};

absl::Status FeedServer::Impl::Start() {
  auto security = SetUpSecurity(config_);
  if (!security.ok()) return security.status();
  security_ = std::move(*security);
  WarnAboutExposure(config_);

  storage::RocksDbOptions so = config_.storage;
  so.idempotency_retention_ms = config_.core.idempotency_retention_ms;
  so.history_expired = [retention_ms = config_.core.history_retention_ms](
                           storage::Table table, std::string_view value, int64_t now_ms) {
    return core::HistoryExpired(table, value, now_ms, retention_ms);
  };
  so.defer_compactions = true;  // InventoryCore::Open starts them once recovered
  if (config_.migrate) so.migrate_format_1 = core::JournalEntryOfEvent;
  if (!config_.restore_from.empty()) {
    auto restored = admin::RestoreBackup(config_.restore_from, so.path);
    if (!restored.ok()) return restored.status();
    ServerLog()->info(
        "restored backup {} (store {}, up to sequence {}, relay cursor {}) into {}: a new "
        "store id starts a new timeline",
        config_.restore_from, restored->store_id(), restored->last_sequence(),
        restored->relay_cursor(), so.path);
  }
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
    auto relay = bridge::Relay::Create(*store_, config_.kafka, [core = core_.get()] {
      return core->change_feed().last_sequence();
    });
    if (!relay.ok()) return relay.status();
    relay_ = std::move(*relay);
    waker_ = std::make_unique<RelayWaker>(relay_.get());
    core_->change_feed().Subscribe(waker_.get(), UINT64_MAX);
    relay_->Start();
  }

  if (config_.log_rpcs) access_log_ = std::make_unique<AccessLog>(config_.log_format == "json");
  store_operations_ = std::make_unique<admin::StoreOperations>(*store_, clock_, config_.core,
                                                               config_.admin, relay_.get());
  ServiceContext sc{core_.get(),
                    &metrics_,
                    &config_,
                    &streams_,
                    access_log_.get(),
                    &bad_request_log_,
                    security_.auth.get(),
                    [this] { return Status(); },
                    store_operations_.get()};
  inventory_service_ = std::make_unique<InventoryServiceImpl>(sc);
  order_service_ = std::make_unique<OrderServiceImpl>(sc);
  admin_service_ = std::make_unique<AdminServiceImpl>(sc);

  auto listener = StartGrpcServer(
      config_, security_, {inventory_service_.get(), order_service_.get(), admin_service_.get()});
  if (!listener.ok()) return listener.status();
  server_ = std::move(listener->server);
  address_ = std::move(listener->address);
  server_->GetHealthCheckService()->SetServingStatus(kBridgeHealthName,
                                                     relay_ && relay_->kafka_reachable());

  if (!config_.http.listen.empty()) {
    auto gateway = http::Gateway::Start(config_.http, sc, *metrics_.registry());
    if (!gateway.ok()) return gateway.status();
    gateway_ = std::move(*gateway);
  }

  if (!config_.metrics_listen.empty()) {
    auto endpoint = StartMetricsEndpoint(config_, metrics_.registry());
    if (!endpoint.ok()) return endpoint.status();
    metrics_endpoint_ = std::move(*endpoint);
  }
  gauges_ = std::make_unique<StateGauges>(*metrics_.registry());
  if (config_.max_free_heap_mb > 0) {
    LimitThreadCaches(static_cast<size_t>(config_.max_free_heap_mb) << 20);
  }
  housekeeping_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "feed-housekeep");
    Housekeeping();
  });
  const char* scheme = config_.tls.enabled() ? "https://" : "http://";
  ServerLog()->info(
      "listening on {}{}{} (durability {}, data {}){}{}{}", address_,
      config_.tls.enabled() ? (config_.tls.mutual() ? " with mutual TLS" : " with TLS") : "",
      gateway_ ? fmt::format(", HTTP on {}{}", scheme, gateway_->address()) : "",
      config_.storage.durability == storage::Durability::kSync ? "sync" : "async",
      config_.storage.path,
      config_.metrics_listen.empty() ? ""
                                     : ", metrics on http://" + config_.metrics_listen + "/metrics",
      relay_ ? ", relaying to Kafka at " + config_.kafka.brokers : ", Kafka relay off",
      security_.auth->enabled() ? ", authentication on" : "");
  return absl::OkStatus();
}

// Gives the allocator's free pages back to the OS above --max-free-heap-mb.
HeapStats FeedServer::Impl::TrimHeap() {
  HeapStats heap = ReadHeapStats();
  if (config_.max_free_heap_mb > 0 &&
      heap.free_bytes > static_cast<size_t>(config_.max_free_heap_mb) << 20) {
    ReleaseFreeHeap();
    gauges_->CountHeapRelease();
    heap = ReadHeapStats();
  }
  return heap;
}

// Once a second: gauges, heap trimming and the bridge's health status.
void FeedServer::Impl::Housekeeping() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    gauges_->Set(core_->stats());
    gauges_->Set(store_->memory_usage());
    gauges_->Set(store_->write_counts());
    gauges_->Set(store_operations_->audit_stats());
    gauges_->Set(TrimHeap());
    if (relay_) {
      auto r = relay_->stats();
      gauges_->Set(r);
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
  ServerLog()->info("shutting down (grace {} ms)", config_.shutdown_grace_ms);
  if (server_) {
    // NOT_SERVING for every service (SetServingStatus would be undone by Shutdown anyway).
    server_->GetHealthCheckService()->Shutdown();
    streams_.CloseAll(absl::UnavailableError("the server is shutting down"));
    if (gateway_) gateway_->Shutdown(std::chrono::milliseconds(config_.shutdown_grace_ms));
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(config_.shutdown_grace_ms));
    server_->Wait();
  }
  if (core_) core_->Shutdown();
  if (relay_) {
    core_->change_feed().Unsubscribe(waker_.get());
    relay_->Shutdown();
  }
  metrics_endpoint_.exposer.reset();
  gateway_.reset();
  server_.reset();
  store_operations_.reset();  // waits for a running audit, backup or replay
  relay_.reset();
  core_.reset();
  store_.reset();  // syncs the WAL and closes RocksDB
  ServerLog()->info("stopped");
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
std::string FeedServer::http_address() const {
  return impl_->gateway_ ? impl_->gateway_->address() : "";
}
core::InventoryCore& FeedServer::core() { return *impl_->core_; }

}  // namespace feed::server

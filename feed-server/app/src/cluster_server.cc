#include "app/cluster_server.h"

#include <mutex>

#include "admin/backup.h"
#include "bridge/shard_log.h"
#include "cluster/cluster_node.h"
#include "cluster/request_routing.h"
#include "fmt/format.h"
#include "grpc_shard_forwarder.h"
#include "grpcpp/grpcpp.h"
#include "http/gateway.h"
#include "security/authorizer.h"
#include "security/tls_files.h"
#include "server/logging.h"
#include "server/observability.h"
#include "server/operations.h"
#include "server/services.h"
#include "server_setup.h"

namespace feed::server {
namespace {

// Routes each unary call to the core of its shard on this node (core_router.h); audits run
// on this node's copy of a shard, one at a time per shard.
class ClusterRouter final : public CoreRouter {
 public:
  ClusterRouter(const cluster::ClusterNode& node, const core::Clock& clock,
                const ServerConfig& config)
      : node_(node) {
    for (uint32_t s = 0; s < node.shard_count(); ++s) {
      admin::StoreOperationsOptions of_shard = config.admin;
      of_shard.shard = admin::ShardOfStore{s, node.shard_count()};
      store_operations_.push_back(
          std::make_unique<admin::StoreOperations>(node.Store(s), clock, config.core, of_shard));
    }
  }

  absl::StatusOr<std::shared_ptr<core::InventoryCore>> Route(
      std::string_view method, const google::protobuf::Message& request) const override {
    auto shard = ShardOf(method, request);
    if (!shard.ok()) return shard.status();
    return CoreOf(*shard);
  }

  absl::StatusOr<std::shared_ptr<core::InventoryCore>> RouteShard(
      uint32_t shard, std::string_view field) const override {
    if (absl::Status known = KnownShard(shard, field); !known.ok()) return known;
    return CoreOf(shard);
  }

  absl::StatusOr<uint32_t> ShardOf(std::string_view method,
                                   const google::protobuf::Message& request) const override {
    return cluster::ShardOfRequest(method, request, node_.shard_count());
  }

  uint32_t shard_count() const override { return node_.shard_count(); }

  inventory::v1::GetShardMapResponse ShardMap() const override {
    inventory::v1::GetShardMapResponse map;
    map.set_shard_count(node_.shard_count());
    map.set_node_id(node_id_);
    const std::vector<cluster::ShardOwner> owners = node_.ShardMap();
    for (size_t s = 0; s < owners.size(); ++s) {
      auto* entry = map.add_shards();
      entry->set_shard(static_cast<uint32_t>(s));
      entry->set_epoch(owners[s].epoch);
      entry->set_node_id(owners[s].node_id);
      entry->set_address(owners[s].address);
    }
    return map;
  }

  absl::StatusOr<ShardStore> StoreOfShard(uint32_t shard) const override {
    if (absl::Status known = KnownShard(shard, "shard"); !known.ok()) return known;
    return ShardStore{store_operations_[shard].get(), node_.Core(shard) == nullptr};
  }

  void set_node_id(std::string id) { node_id_ = std::move(id); }

 private:
  // INVALID_ARGUMENT naming `field` when the cluster has no shard `shard`.
  absl::Status KnownShard(uint32_t shard, std::string_view field) const {
    if (shard < node_.shard_count()) return absl::OkStatus();
    return absl::InvalidArgumentError(fmt::format("{}: {} is not a shard of this cluster (0 to {})",
                                                  field, shard, node_.shard_count() - 1));
  }

  // This node's core of `shard`, or UNAVAILABLE naming the owner (in kShardOwnerKey too).
  absl::StatusOr<std::shared_ptr<core::InventoryCore>> CoreOf(uint32_t shard) const {
    if (auto core = node_.Core(shard)) return core;
    const cluster::ShardOwner owner = node_.ShardMap()[shard];
    absl::Status elsewhere = absl::UnavailableError(
        owner.claimed() ? fmt::format("shard {} is served by {} at {} (epoch {}); retry there",
                                      shard, owner.node_id, owner.address, owner.epoch)
                        : fmt::format("shard {} has no owner yet; retry shortly", shard));
    if (owner.claimed() && owner.node_id != node_id_) {
      SetShardOwner(elsewhere, owner.address);
    }
    return elsewhere;
  }

  const cluster::ClusterNode& node_;
  std::string node_id_;
  // Destroyed before the node (they wait for a running audit of its stores).
  std::vector<std::unique_ptr<admin::StoreOperations>> store_operations_;
};

}  // namespace

class ClusterServer::Impl {
 public:
  explicit Impl(const ServerConfig& config)
      : config_(config), streams_(static_cast<size_t>(config.max_open_streams)) {}

  absl::Status Start() {
    auto security = SetUpSecurity(config_);
    if (!security.ok()) return security.status();
    security_ = std::move(*security);
    WarnAboutExposure(config_);

    const ServerConfig::Cluster& c = config_.cluster;
    cluster::ClusterOptions options;
    options.self = {c.node_id, c.advertise};
    options.log.brokers = c.brokers;
    options.log.topic = c.topic;
    options.log.shards = c.shards;
    options.log.replication_factor = c.replication_factor;
    options.log.min_insync_replicas = c.min_insync_replicas;
    options.log.append_timeout_ms = c.log_timeout_ms;
    options.log.client_id = "feed-" + c.node_id;
    // One set of Kafka security flags for the shard log and the relays (the same brokers
    // unless --cluster-brokers says otherwise).
    options.log.kafka_properties = config_.kafka.kafka_properties;
    options.log.security = config_.kafka.security;
    options.log.credentials_check_ms = config_.kafka.credentials_check_ms;
    options.group_id = c.group;
    options.session_timeout_ms = c.session_timeout_ms;
    options.log_timeout_ms = c.log_timeout_ms;
    options.data_dir = config_.storage.path;
    options.store = config_.storage;
    // Every shard has its own store: the memory budgets are the node's, shared out.
    options.store.block_cache_bytes =
        std::max<size_t>(config_.storage.block_cache_bytes / c.shards, 4u << 20);
    options.store.memtable_budget_bytes =
        std::max<size_t>(config_.storage.memtable_budget_bytes / c.shards, 4u << 20);
    options.store.background_threads = 1;
    options.core = config_.core;
    if (!config_.kafka.brokers.empty()) options.relay = config_.kafka;
    options.core.on_batch_committed = [this](size_t commands, size_t events, double seconds) {
      metrics_.ObserveBatch(commands, events, seconds);
    };
    if (absl::Status s = bridge::EnsureShardLogTopic(options.log, c.log_timeout_ms); !s.ok()) {
      return s;
    }
    if (!config_.restore_from.empty()) {
      auto restored = admin::RestoreShardBackups(
          config_.restore_from, static_cast<uint32_t>(c.shards),
          [&](uint32_t shard) { return cluster::ShardStorePath(config_.storage.path, shard); });
      if (!restored.ok()) return restored.status();
      for (const auto& m : *restored) {
        ServerLog()->info(
            "restored shard {} from backup {} (up to sequence {}): its log is read from "
            "offset {} on",
            m.shard(), config_.restore_from, m.last_sequence(), m.shard_log_next_offset());
      }
    }
    auto node = cluster::ClusterNode::Start(std::move(options), clock_);
    if (!node.ok()) return node.status();
    node_ = std::move(*node);
    router_ = std::make_unique<ClusterRouter>(*node_, clock_, config_);
    router_->set_node_id(c.node_id);

    if (config_.log_rpcs) {
      access_log_ = std::make_unique<AccessLog>(config_.log_format == "json");
    }
    auto forwarder = GrpcShardForwarder::Create(config_);
    if (!forwarder.ok()) return forwarder.status();
    forwarder_ = std::move(*forwarder);
    ServiceContext sc{nullptr,
                      &metrics_,
                      &config_,
                      &streams_,
                      access_log_.get(),
                      &bad_request_log_,
                      security_.auth.get(),
                      nullptr,
                      nullptr,
                      router_.get(),
                      forwarder_.get()};
    inventory_service_ = std::make_unique<InventoryServiceImpl>(sc);
    order_service_ = std::make_unique<OrderServiceImpl>(sc);
    admin_service_ = std::make_unique<AdminServiceImpl>(sc);

    auto listener = StartGrpcServer(
        config_, security_, {inventory_service_.get(), order_service_.get(), admin_service_.get()});
    if (!listener.ok()) return listener.status();
    server_ = std::move(listener->server);
    address_ = std::move(listener->address);
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
    ServerLog()->info(
        "listening on {}{} as cluster node {} (advertised {}; {} shards on {} at {} over {}, group "
        "{}){}{}",
        address_, config_.tls.enabled() ? " with TLS" : "", c.node_id, c.advertise, c.shards,
        c.topic, c.brokers, config_.kafka.security.protocol, c.group,
        gateway_ ? fmt::format(", HTTP on {}{}", config_.tls.enabled() ? "https://" : "http://",
                               gateway_->address())
                 : "",
        config_.kafka.brokers.empty()
            ? ", relay to the public topics off"
            : ", each served shard relaying to Kafka at " + config_.kafka.brokers);
    return absl::OkStatus();
  }

  void Shutdown() {
    {
      std::lock_guard lock(mu_);
      if (shut_down_) return;
      shut_down_ = true;
    }
    ServerLog()->info("shutting down (grace {} ms)", config_.shutdown_grace_ms);
    if (server_) {
      server_->GetHealthCheckService()->Shutdown();
      streams_.CloseAll(absl::UnavailableError("the server is shutting down"));
      if (gateway_) gateway_->Shutdown(std::chrono::milliseconds(config_.shutdown_grace_ms));
      // Forwarded calls still in flight answer now (CANCELLED), while the gateway that
      // passed their callbacks exists.
      if (forwarder_) forwarder_->Shutdown();
      server_->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(config_.shutdown_grace_ms));
      server_->Wait();
    }
    metrics_endpoint_.exposer.reset();
    gateway_.reset();
    server_.reset();
    router_.reset();
    node_.reset();  // stops the cores and closes every shard's store
    ServerLog()->info("stopped");
  }

  ServerConfig config_;
  Metrics metrics_;
  StreamRegistry streams_;
  std::unique_ptr<AccessLog> access_log_;
  LogRateLimit bad_request_log_{std::chrono::seconds(1)};
  core::SystemClock clock_;
  GrpcSecurity security_;
  std::unique_ptr<cluster::ClusterNode> node_;
  std::unique_ptr<ClusterRouter> router_;
  std::unique_ptr<GrpcShardForwarder> forwarder_;
  std::unique_ptr<InventoryServiceImpl> inventory_service_;
  std::unique_ptr<OrderServiceImpl> order_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<http::Gateway> gateway_;
  MetricsEndpoint metrics_endpoint_;
  std::string address_;
  std::mutex mu_;
  bool shut_down_ = false;
};

ClusterServer::ClusterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterServer::~ClusterServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<ClusterServer>> ClusterServer::Start(const ServerConfig& config) {
  auto impl = std::make_unique<Impl>(config);
  if (absl::Status s = impl->Start(); !s.ok()) {
    impl->Shutdown();
    return s;
  }
  return std::unique_ptr<ClusterServer>(new ClusterServer(std::move(impl)));
}

void ClusterServer::Shutdown() { impl_->Shutdown(); }
const std::string& ClusterServer::address() const { return impl_->address_; }
std::string ClusterServer::http_address() const {
  return impl_->gateway_ ? impl_->gateway_->address() : "";
}

}  // namespace feed::server

// The fixture of the gRPC integration tests: an in-process FeedServer (real RocksDB in a
// temporary directory, Kafka relay off) on a loopback port, and generated clients.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "app/feed_server.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"

namespace feed::test {

namespace inv = inventory::v1;
namespace ord = order::v1;

class GrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/feed-grpc-XXXXXX";
    dir_ = mkdtemp(tmpl);
    config_.listen = "127.0.0.1:0";
    config_.metrics_listen = "";
    config_.http.listen = "127.0.0.1:0";
    config_.storage.path = dir_ + "/data";
    config_.storage.durability = storage::Durability::kAsync;
    config_.log_rpcs = false;
    config_.shutdown_grace_ms = 2000;
    Customize(config_);
    StartServer();
  }

  void TearDown() override {
    stub_.reset();
    orders_.reset();
    if (server_) server_->Shutdown();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  virtual void Customize(server::ServerConfig&) {}

  void StartServer() {
    auto server = server::FeedServer::Start(config_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = inv::InventoryService::NewStub(channel_);
    orders_ = ord::OrderService::NewStub(channel_);
  }

  std::unique_ptr<grpc::ClientContext> Ctx(int timeout_ms = 5000) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    return ctx;
  }

  inv::StockLevel Adjust(const std::string& sku, int64_t qty, const std::string& location = "") {
    inv::AdjustStockRequest req;
    req.set_sku(sku);
    req.set_location(location);
    req.set_mode(inv::ADJUST_MODE_SET);
    req.set_quantity(qty);
    inv::AdjustStockResponse resp;
    auto status = stub_->AdjustStock(Ctx().get(), req, &resp);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return resp.level();
  }

  grpc::Status Reserve(const std::string& sku, int64_t qty, inv::ReserveResponse* resp,
                       const std::string& key = "") {
    inv::ReserveRequest req;
    auto* line = req.add_lines();
    line->set_sku(sku);
    line->set_quantity(qty);
    req.set_idempotency_key(key);
    return stub_->Reserve(Ctx().get(), req, resp);
  }

  inv::StockLevel Level(const std::string& sku) {
    inv::GetStockRequest req;
    auto* k = req.add_keys();
    k->set_sku(sku);
    k->set_location("default");
    inv::GetStockResponse resp;
    auto status = stub_->GetStock(Ctx().get(), req, &resp);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return resp.levels_size() ? resp.levels(0) : inv::StockLevel();
  }

  std::string dir_;
  server::ServerConfig config_;
  std::unique_ptr<server::FeedServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inv::InventoryService::Stub> stub_;
  std::unique_ptr<ord::OrderService::Stub> orders_;
};

}  // namespace feed::test

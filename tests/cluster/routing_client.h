// A client of a feed-server cluster for the fault tests: it routes each call by the shard map
// (GetShardMap, asked of any node it can reach), follows `feed-shard-owner` when a node
// answers that another serves the shard, and retries a call that failed in doubt with the
// same idempotency key until it is answered or `give_up` passes: what a production client
// does, so that the test sees what such a client sees.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/shard_hash.h"
#include "grpcpp/grpcpp.h"
#include "inventory/v1/inventory.grpc.pb.h"

namespace feed::cluster_test {

namespace inv = ::inventory::v1;

class RoutingClient {
 public:
  explicit RoutingClient(std::vector<std::string> addresses) : addresses_(std::move(addresses)) {}

  // Refreshes the map from the first node that answers; false when none does.
  bool RefreshMap() {
    for (const std::string& address : addresses_) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      inv::GetShardMapResponse map;
      if (Stub(address).GetShardMap(&ctx, inv::GetShardMapRequest(), &map).ok() &&
          map.shard_count() > 0) {
        std::lock_guard lock(mu_);
        map_ = map;
        return true;
      }
    }
    return false;
  }
  inv::GetShardMapResponse map() const {
    std::lock_guard lock(mu_);
    return map_;
  }

  // Calls `call(stub, ctx)` on the owner of `shard` until it is answered with anything but
  // UNAVAILABLE / DEADLINE_EXCEEDED / CANCELLED, or `give_up` passes (then the last status).
  template <class Call>
  grpc::Status OnShard(uint32_t shard, Call call, std::chrono::milliseconds give_up,
                       std::string* answered_by = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + give_up;
    grpc::Status status;
    for (;;) {
      std::string address;
      {
        std::lock_guard lock(mu_);
        if (shard < static_cast<uint32_t>(map_.shards_size())) {
          address = map_.shards(static_cast<int>(shard)).address();
        }
      }
      if (address.empty()) {
        RefreshMap();
      } else {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
        status = call(Stub(address), ctx);
        // CANCELLED: the server ended the call (a node stopping); the key makes a retry safe.
        if (status.ok() || (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
                            status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
                            status.error_code() != grpc::StatusCode::CANCELLED)) {
          if (answered_by != nullptr) *answered_by = address;
          return status;
        }
        auto owner = ctx.GetServerTrailingMetadata().find("feed-shard-owner");
        if (owner != ctx.GetServerTrailingMetadata().end()) {
          std::lock_guard lock(mu_);
          if (shard < static_cast<uint32_t>(map_.shards_size())) {
            map_.mutable_shards(static_cast<int>(shard))
                ->set_address(std::string(owner->second.data(), owner->second.size()));
          }
          continue;  // straight to the owner
        }
        RefreshMap();
      }
      if (std::chrono::steady_clock::now() > deadline) return status;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  grpc::Status Reserve(const std::string& sku, int64_t quantity, const std::string& key,
                       inv::ReserveResponse* out, std::chrono::milliseconds give_up) {
    const uint32_t shard = cluster::ShardOf(sku, shard_count());
    return OnShard(
        shard,
        [&](inv::InventoryService::Stub& stub, grpc::ClientContext& ctx) {
          inv::ReserveRequest r;
          auto* line = r.add_lines();
          line->set_sku(sku);
          line->set_quantity(quantity);
          r.set_idempotency_key(key);
          return stub.Reserve(&ctx, r, out);
        },
        give_up);
  }

  uint32_t shard_count() const {
    std::lock_guard lock(mu_);
    return map_.shard_count();
  }

  inv::InventoryService::Stub& Stub(const std::string& address) {
    std::lock_guard lock(mu_);
    auto& stub = stubs_[address];
    if (!stub) {
      stub = inv::InventoryService::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    return *stub;
  }

 private:
  const std::vector<std::string> addresses_;
  mutable std::mutex mu_;
  inv::GetShardMapResponse map_;
  std::map<std::string, std::unique_ptr<inv::InventoryService::Stub>> stubs_;
};

}  // namespace feed::cluster_test

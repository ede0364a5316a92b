// Unit tests of cluster mode's request routing (cluster/request_routing.h): by SKU, by the
// shard a generated id names, and the errors that name the field.
#include "cluster/request_routing.h"
#include "cluster/shard_hash.h"
#include "gtest/gtest.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"

namespace feed::cluster {
namespace {

namespace inv = ::inventory::v1;
namespace ord = ::order::v1;
constexpr uint32_t kShards = 12;

// Two SKUs on different shards.
std::pair<std::string, std::string> SkusOnTwoShards() {
  std::string a = "SKU-0";
  for (int i = 1;; ++i) {
    std::string b = "SKU-" + std::to_string(i);
    if (ShardOf(b, kShards) != ShardOf(a, kShards)) return {a, b};
  }
}

TEST(RequestRoutingTest, SkuRequestsGoToTheSkusShard) {
  inv::ReserveRequest reserve;
  reserve.add_lines()->set_sku("SKU-000042");
  reserve.add_lines()->set_sku("SKU-000042");
  auto shard = ShardOfRequest("inventory.v1.InventoryService/Reserve", reserve, kShards);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(*shard, 7u);  // the standard FNV-1a value (cluster_ledger_test.cc)

  inv::GetStockRequest get;
  get.add_keys()->set_sku("sku-1");
  get.add_sku("sku-1");
  EXPECT_EQ(*ShardOfRequest("inventory.v1.InventoryService/GetStock", get, kShards), 4u);

  inv::AdjustStockRequest adjust;
  adjust.set_sku("sku-1");
  EXPECT_EQ(*ShardOfRequest("inventory.v1.InventoryService/AdjustStock", adjust, kShards), 4u);

  ord::CreateOrderRequest order;
  order.add_item_ids("sku-1");
  order.add_lines()->set_sku("sku-1");
  EXPECT_EQ(*ShardOfRequest("order.v1.OrderService/CreateOrder", order, kShards), 4u);
}

TEST(RequestRoutingTest, RequestsAcrossShardsAreRefusedNamingTheShards) {
  const auto [a, b] = SkusOnTwoShards();
  inv::ReserveRequest reserve;
  reserve.add_lines()->set_sku(a);
  reserve.add_lines()->set_sku(b);
  auto shard = ShardOfRequest("inventory.v1.InventoryService/Reserve", reserve, kShards);
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(shard.status().message().find("lines: the SKUs are on shards"), std::string::npos)
      << shard.status();

  inv::BatchAdjustStockRequest batch;
  batch.add_adjustments()->set_sku(a);
  batch.add_adjustments()->set_sku(b);
  EXPECT_EQ(ShardOfRequest("inventory.v1.InventoryService/BatchAdjustStock", batch, kShards)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);

  inv::GetStockRequest none;
  auto empty = ShardOfRequest("inventory.v1.InventoryService/GetStock", none, kShards);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("keys:"), std::string::npos);
}

TEST(RequestRoutingTest, IdRequestsGoToTheShardTheirIdNames) {
  EXPECT_EQ(GeneratedIdTag(3), "s3");
  inv::CommitRequest commit;
  commit.set_reservation_id("rsv-s3-17");
  EXPECT_EQ(*ShardOfRequest("inventory.v1.InventoryService/Commit", commit, kShards), 3u);
  inv::GetReservationRequest get;
  get.set_reservation_id("rsv-s11-1");
  EXPECT_EQ(*ShardOfRequest("inventory.v1.InventoryService/GetReservation", get, kShards), 11u);
  ord::PayOrderRequest pay;
  pay.set_order_id("ord-s0-99");
  EXPECT_EQ(*ShardOfRequest("order.v1.OrderService/PayOrder", pay, kShards), 0u);

  for (const char* bad : {"r-1", "rsv-abc123-5", "rsv-s-5", "rsv-s3", "rsv-s3x-1", "ord-s3-1"}) {
    inv::ReleaseRequest release;
    release.set_reservation_id(bad);
    auto r = ShardOfRequest("inventory.v1.InventoryService/Release", release, kShards);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("reservation_id: '"), std::string::npos) << r.status();
  }
  commit.set_reservation_id("rsv-s12-1");
  auto beyond = ShardOfRequest("inventory.v1.InventoryService/Commit", commit, kShards);
  EXPECT_NE(beyond.status().message().find("names shard 12, but this cluster has 12 shards"),
            std::string::npos)
      << beyond.status();
}

TEST(RequestRoutingTest, ClientChosenReservationIdsAndUnroutedMethodsAreRefused) {
  inv::ReserveRequest reserve;
  reserve.add_lines()->set_sku("a");
  reserve.set_reservation_id("my-own-id");
  auto chosen = ShardOfRequest("inventory.v1.InventoryService/Reserve", reserve, kShards);
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(chosen.status().message().find("reservation_id:"), std::string::npos);
  EXPECT_EQ(ShardOfRequest("admin.v1.AdminService/Backup", reserve, kShards).status().code(),
            absl::StatusCode::kUnimplemented);
}

// The opening request of a stream routes like a unary call; watching every SKU (no filter)
// is refused in cluster mode, naming the field.
TEST(RequestRoutingTest, StreamsOfOneShardAreRoutedAndOthersRefused) {
  inv::WatchStockRequest watch;
  watch.add_keys()->set_sku("sku-1");
  watch.add_sku("sku-1");
  EXPECT_EQ(*ShardOfRequest("inventory.v1.InventoryService/WatchStock", watch, kShards), 4u);
  ord::OrderSubscriptionRequest order;
  order.set_order_id("ord-s5-2");
  EXPECT_EQ(*ShardOfRequest("order.v1.OrderService/StreamOrderUpdates", order, kShards), 5u);
  order.set_order_id("o-1");
  EXPECT_EQ(
      ShardOfRequest("order.v1.OrderService/StreamOrderUpdates", order, kShards).status().code(),
      absl::StatusCode::kInvalidArgument);

  inv::WatchStockRequest everything;
  auto all = ShardOfRequest("inventory.v1.InventoryService/WatchStock", everything, kShards);
  EXPECT_EQ(all.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(all.status().message().find("keys: in cluster mode a stream follows"),
            std::string::npos)
      << all.status();
  const auto [a, b] = SkusOnTwoShards();
  inv::WatchStockRequest across;
  across.add_sku(a);
  across.add_sku(b);
  EXPECT_EQ(
      ShardOfRequest("inventory.v1.InventoryService/WatchStock", across, kShards).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ShardOfRequest("inventory.v1.InventoryService/Feed", across, kShards).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace feed::cluster

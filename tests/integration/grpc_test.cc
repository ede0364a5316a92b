// The gRPC API over real loopback channels: an in-process FeedServer (real RocksDB in a
// temporary directory, Kafka relay off) and generated clients.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "app/feed_server.h"
#include "gmock/gmock.h"
#include "grpc_fixture.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"

namespace feed {
namespace {

using test::GrpcTest;
using ::testing::HasSubstr;
namespace inv = inventory::v1;
namespace ord = order::v1;

TEST_F(GrpcTest, ReserveCommitReleaseAndGetReservation) {
  Adjust("sku-1", 10);
  inv::ReserveResponse held;
  ASSERT_TRUE(Reserve("sku-1", 3, &held).ok());
  EXPECT_EQ(held.reservation().state(), inv::RESERVATION_STATE_HELD);
  ASSERT_EQ(held.levels_size(), 1);
  EXPECT_EQ(held.levels(0).available(), 7);

  inv::CommitRequest commit;
  commit.set_reservation_id(held.reservation().reservation_id());
  inv::CommitResponse committed;
  ASSERT_TRUE(stub_->Commit(Ctx().get(), commit, &committed).ok());
  EXPECT_EQ(committed.levels(0).on_hand(), 7);
  EXPECT_EQ(committed.levels(0).reserved(), 0);

  inv::ReserveResponse second;
  ASSERT_TRUE(Reserve("sku-1", 2, &second).ok());
  inv::ReleaseRequest release;
  release.set_reservation_id(second.reservation().reservation_id());
  inv::ReleaseResponse released;
  ASSERT_TRUE(stub_->Release(Ctx().get(), release, &released).ok());
  EXPECT_EQ(released.levels(0).available(), 7);

  inv::GetReservationRequest get;
  get.set_reservation_id(held.reservation().reservation_id());
  inv::Reservation r;
  ASSERT_TRUE(stub_->GetReservation(Ctx().get(), get, &r).ok());
  EXPECT_EQ(r.state(), inv::RESERVATION_STATE_COMMITTED);

  // Committing twice is a precondition failure naming the state.
  auto again = stub_->Commit(Ctx().get(), commit, &committed);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(again.error_message(), HasSubstr("COMMITTED"));
}

TEST_F(GrpcTest, ErrorsNameTheFieldAndTheProblem) {
  Adjust("sku-e", 2);
  inv::ReserveResponse resp;
  auto short_stock = Reserve("sku-e", 5, &resp);
  EXPECT_EQ(short_stock.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(short_stock.error_message(), HasSubstr("sku-e"));
  EXPECT_THAT(short_stock.error_message(), HasSubstr("available 2"));

  auto bad_sku = Reserve("bad sku!", 1, &resp);
  EXPECT_EQ(bad_sku.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_sku.error_message(), HasSubstr("lines[0].sku"));

  auto zero = Reserve("sku-e", 0, &resp);
  EXPECT_EQ(zero.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(zero.error_message(), HasSubstr("lines[0].quantity"));

  auto unknown = Reserve("no-such-sku", 1, &resp);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);

  inv::ReserveRequest empty;
  EXPECT_EQ(stub_->Reserve(Ctx().get(), empty, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  inv::CommitRequest commit;
  inv::CommitResponse cr;
  auto missing_id = stub_->Commit(Ctx().get(), commit, &cr);
  EXPECT_EQ(missing_id.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(missing_id.error_message(), HasSubstr("reservation_id"));
  commit.set_reservation_id("rsv-none");
  EXPECT_EQ(stub_->Commit(Ctx().get(), commit, &cr).error_code(), grpc::StatusCode::NOT_FOUND);

  inv::AdjustStockRequest adjust;
  adjust.set_sku("sku-e");
  adjust.set_quantity(1);
  inv::AdjustStockResponse ar;
  auto no_mode = stub_->AdjustStock(Ctx().get(), adjust, &ar);
  EXPECT_EQ(no_mode.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_mode.error_message(), HasSubstr("mode"));

  inv::GetStockRequest no_keys;
  inv::GetStockResponse gr;
  EXPECT_EQ(stub_->GetStock(Ctx().get(), no_keys, &gr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  ord::CreateOrderRequest no_customer;
  no_customer.add_item_ids("sku-e");
  ord::CreateOrderResponse cor;
  auto oc = orders_->CreateOrder(Ctx().get(), no_customer, &cor);
  EXPECT_EQ(oc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(oc.error_message(), HasSubstr("customer_id"));

  // Nothing of the failed calls changed the level.
  EXPECT_EQ(Level("sku-e").reserved(), 0);
}

TEST_F(GrpcTest, OversizedMessageIsRejectedWithResourceExhausted) {
  inv::ReserveRequest req;
  req.set_reservation_id(std::string(2 << 20, 'x'));  // above the 1 MiB receive limit
  inv::ReserveResponse resp;
  auto s = stub_->Reserve(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(GrpcTest, IdempotencyByFieldAndByHeader) {
  Adjust("sku-i", 10);
  inv::ReserveResponse first, second;
  ASSERT_TRUE(Reserve("sku-i", 1, &first, "key-1").ok());
  ASSERT_TRUE(Reserve("sku-i", 1, &second, "key-1").ok());
  EXPECT_TRUE(second.replayed());
  EXPECT_EQ(first.reservation().reservation_id(), second.reservation().reservation_id());
  EXPECT_EQ(Level("sku-i").reserved(), 1);
  inv::ReserveResponse conflict;
  auto s = Reserve("sku-i", 2, &conflict, "key-1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(s.error_message(), HasSubstr("different"));

  // The seed's CreateOrder has no key field: the idempotency-key header stands in.
  ord::CreateOrderRequest order;
  order.set_customer_id("c-1");
  order.add_item_ids("sku-i");
  ord::CreateOrderResponse a, b;
  auto ctx1 = Ctx();
  ctx1->AddMetadata("idempotency-key", "order-key-1");
  ASSERT_TRUE(orders_->CreateOrder(ctx1.get(), order, &a).ok());
  auto ctx2 = Ctx();
  ctx2->AddMetadata("idempotency-key", "order-key-1");
  ASSERT_TRUE(orders_->CreateOrder(ctx2.get(), order, &b).ok());
  EXPECT_EQ(a.order_id(), b.order_id());
  EXPECT_TRUE(b.replayed());
  EXPECT_EQ(Level("sku-i").reserved(), 2);
}

TEST_F(GrpcTest, BatchAdjustStockAnswersEachLineInOneCall) {
  inv::BatchAdjustStockRequest batch;
  for (int i = 0; i < 300; ++i) {
    auto* a = batch.add_adjustments();
    a->set_sku(i == 7 ? "bad sku" : "batch-" + std::to_string(i));
    a->set_mode(inv::ADJUST_MODE_SET);
    a->set_quantity(i);
    a->set_idempotency_key("batch-key-" + std::to_string(i));
  }
  inv::BatchAdjustStockResponse response;
  auto ctx = Ctx();
  ASSERT_TRUE(stub_->BatchAdjustStock(ctx.get(), batch, &response).ok());
  ASSERT_EQ(response.results_size(), 300);
  for (int i = 0; i < 300; ++i) {
    if (i == 7) {
      EXPECT_EQ(response.results(i).code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
      EXPECT_THAT(response.results(i).message(), HasSubstr("adjustments[7].sku"));
    } else {
      EXPECT_EQ(response.results(i).code(), 0) << response.results(i).message();
      EXPECT_EQ(response.results(i).response().level().on_hand(), i);
    }
  }
  EXPECT_EQ(Level("batch-299").on_hand(), 299);
}

TEST_F(GrpcTest, GetStockReadsManySkusAndLocationsInOneCall) {
  Adjust("multi-a", 1, "wh-1");
  Adjust("multi-a", 2, "wh-2");
  Adjust("multi-b", 3);
  inv::GetStockRequest req;
  req.add_keys()->set_sku("multi-a");  // every location
  auto* b = req.add_keys();
  b->set_sku("multi-b");
  b->set_location("default");
  req.add_keys()->set_sku("multi-missing");
  inv::GetStockResponse resp;
  ASSERT_TRUE(stub_->GetStock(Ctx().get(), req, &resp).ok());
  ASSERT_EQ(resp.levels_size(), 3);
  EXPECT_EQ(resp.levels(0).location(), "wh-1");
  EXPECT_EQ(resp.levels(1).location(), "wh-2");
  EXPECT_EQ(resp.levels(2).on_hand(), 3);
  ASSERT_EQ(resp.missing_size(), 1);
  EXPECT_EQ(resp.missing(0).sku(), "multi-missing");
}

TEST_F(GrpcTest, OrderLifecycleAndStreamEndsAtTerminalStatus) {
  Adjust("sku-o", 5);
  ord::CreateOrderRequest create;
  create.set_customer_id("cust-441");
  create.add_item_ids("sku-o");
  create.add_item_ids("sku-o");
  create.set_total_amount(149.99);
  ord::CreateOrderResponse created;
  ASSERT_TRUE(orders_->CreateOrder(Ctx().get(), create, &created).ok());
  EXPECT_EQ(created.status(), "CONFIRMED");
  EXPECT_GT(created.timestamp(), 1'600'000'000);
  EXPECT_EQ(Level("sku-o").reserved(), 2);

  auto stream_ctx = Ctx(10000);
  ord::OrderSubscriptionRequest sub;
  sub.set_order_id(created.order_id());
  auto reader = orders_->StreamOrderUpdates(stream_ctx.get(), sub);
  ord::OrderStatusUpdate update;
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.status(), "CONFIRMED");

  ord::PayOrderRequest pay;
  pay.set_order_id(created.order_id());
  pay.set_payment_reference("pay-1");
  ord::OrderResponse paid;
  ASSERT_TRUE(orders_->PayOrder(Ctx().get(), pay, &paid).ok());
  EXPECT_EQ(Level("sku-o").on_hand(), 3);
  ord::AdvanceOrderRequest skip;
  skip.set_order_id(created.order_id());
  skip.set_target(ord::ORDER_STATUS_DELIVERED);
  ord::OrderResponse out;
  EXPECT_EQ(orders_->AdvanceOrder(Ctx().get(), skip, &out).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  for (auto target :
       {ord::ORDER_STATUS_PACKING, ord::ORDER_STATUS_DISPATCHED, ord::ORDER_STATUS_DELIVERED}) {
    ord::AdvanceOrderRequest adv;
    adv.set_order_id(created.order_id());
    adv.set_target(target);
    ASSERT_TRUE(orders_->AdvanceOrder(Ctx().get(), adv, &out).ok());
  }
  std::vector<std::string> seen;
  while (reader->Read(&update)) seen.push_back(update.status());
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_THAT(seen, ::testing::ElementsAre("PAID", "PACKING", "DISPATCHED", "DELIVERED"));

  ord::GetOrderRequest get;
  get.set_order_id(created.order_id());
  ord::Order order;
  ASSERT_TRUE(orders_->GetOrder(Ctx().get(), get, &order).ok());
  EXPECT_EQ(order.status(), ord::ORDER_STATUS_DELIVERED);

  // A cancelled order releases its hold; its stream ends with CANCELLED as last status.
  ASSERT_TRUE(orders_->CreateOrder(Ctx().get(), create, &created).ok());
  ord::CancelOrderRequest cancel;
  cancel.set_order_id(created.order_id());
  ASSERT_TRUE(orders_->CancelOrder(Ctx().get(), cancel, &out).ok());
  EXPECT_EQ(Level("sku-o").reserved(), 0);
  auto ctx2 = Ctx();
  sub.set_order_id(created.order_id());
  auto reader2 = orders_->StreamOrderUpdates(ctx2.get(), sub);
  ASSERT_TRUE(reader2->Read(&update));
  EXPECT_EQ(update.status(), "CANCELLED");
  EXPECT_FALSE(reader2->Read(&update));
  EXPECT_TRUE(reader2->Finish().ok());

  sub.set_order_id("ord-none");
  auto ctx3 = Ctx();
  auto reader3 = orders_->StreamOrderUpdates(ctx3.get(), sub);
  EXPECT_FALSE(reader3->Read(&update));
  EXPECT_EQ(reader3->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcTest, WatchStockSnapshotThenChangesThenResume) {
  Adjust("w-1", 10);
  Adjust("w-2", 20);
  Adjust("other", 5);
  auto ctx = Ctx(10000);
  inv::WatchStockRequest req;
  req.add_keys()->set_sku("w-1");
  req.add_keys()->set_sku("w-2");
  auto reader = stub_->WatchStock(ctx.get(), req);
  inv::StockUpdate u;
  ASSERT_TRUE(reader->Read(&u));
  EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(u.level().sku(), "w-1");
  ASSERT_TRUE(reader->Read(&u));
  EXPECT_EQ(u.level().sku(), "w-2");
  ASSERT_TRUE(reader->Read(&u));
  EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT_END);
  uint64_t snapshot_seq = u.sequence();

  Adjust("other", 6);  // filtered out
  inv::ReserveResponse r;
  ASSERT_TRUE(Reserve("w-2", 4, &r).ok());
  ASSERT_TRUE(reader->Read(&u));
  EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_CHANGE);
  EXPECT_EQ(u.level().sku(), "w-2");
  EXPECT_EQ(u.level().available(), 16);
  EXPECT_GT(u.sequence(), snapshot_seq);
  uint64_t seen = u.sequence();
  ctx->TryCancel();
  reader->Finish();

  // Changes made while disconnected arrive on resume, without a snapshot.
  ASSERT_TRUE(Reserve("w-1", 1, &r).ok());
  auto ctx2 = Ctx(10000);
  req.set_resume_after_sequence(seen);
  auto resumed = stub_->WatchStock(ctx2.get(), req);
  ASSERT_TRUE(resumed->Read(&u));
  EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_CHANGE);
  EXPECT_EQ(u.level().sku(), "w-1");
  EXPECT_EQ(u.level().available(), 9);
  ctx2->TryCancel();
  resumed->Finish();
}

class GrpcSmallRetentionTest : public GrpcTest {
  void Customize(server::ServerConfig& c) override { c.core.change_feed_retention = 2; }
};

TEST_F(GrpcSmallRetentionTest, ResumeFromAForgottenSequenceSaysSoOrResnapshots) {
  for (int i = 0; i < 10; ++i) Adjust("g-1", 10 + i);
  inv::WatchStockRequest req;
  req.add_keys()->set_sku("g-1");
  req.set_resume_after_sequence(1);
  auto ctx = Ctx();
  auto reader = stub_->WatchStock(ctx.get(), req);
  inv::StockUpdate u;
  EXPECT_FALSE(reader->Read(&u));
  auto s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(), HasSubstr("no longer retained"));

  req.set_snapshot_on_gap(true);
  auto ctx2 = Ctx();
  auto again = stub_->WatchStock(ctx2.get(), req);
  ASSERT_TRUE(again->Read(&u));
  EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(u.level().on_hand(), 19);
  ctx2->TryCancel();
  again->Finish();
}

class GrpcShortHistoryTest : public GrpcTest {
  void Customize(server::ServerConfig& c) override { c.core.history_retention_ms = 300; }
};

TEST_F(GrpcShortHistoryTest, AFinishedOrderIsNotFoundOnceItsHistoryRetentionHasPassed) {
  Adjust("sku-h", 5);
  ord::CreateOrderRequest create;
  create.set_customer_id("cust-7");
  create.add_item_ids("sku-h");
  ord::CreateOrderResponse created;
  ASSERT_TRUE(orders_->CreateOrder(Ctx().get(), create, &created).ok());
  ord::CancelOrderRequest cancel;
  cancel.set_order_id(created.order_id());
  ord::OrderResponse cancelled;
  ASSERT_TRUE(orders_->CancelOrder(Ctx().get(), cancel, &cancelled).ok());
  ord::GetOrderRequest get;
  get.set_order_id(created.order_id());
  ord::Order order;
  ASSERT_TRUE(orders_->GetOrder(Ctx().get(), get, &order).ok());
  EXPECT_EQ(order.status(), ord::ORDER_STATUS_CANCELLED);

  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  grpc::Status gone = orders_->GetOrder(Ctx().get(), get, &order);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::NOT_FOUND) << gone.error_message();
  EXPECT_THAT(gone.error_message(), HasSubstr(created.order_id()));
  inv::GetReservationRequest reservation;
  reservation.set_reservation_id(created.reservation_id());
  inv::Reservation released;
  EXPECT_EQ(stub_->GetReservation(Ctx().get(), reservation, &released).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

class GrpcSlowReaderTest : public GrpcTest {
  void Customize(server::ServerConfig& c) override { c.stream_max_queued_levels = 100; }
};

TEST_F(GrpcSlowReaderTest, SlowReaderGetsConflatedNewestLevels) {
  Adjust("hot", 1);
  auto ctx = Ctx(30000);
  inv::WatchStockRequest req;
  req.add_keys()->set_sku("hot");
  auto reader = stub_->WatchStock(ctx.get(), req);
  inv::StockUpdate u;
  ASSERT_TRUE(reader->Read(&u));  // snapshot
  ASSERT_TRUE(reader->Read(&u));  // snapshot end
  // 20,000 changes of one level while the reader does not read.
  constexpr int kChanges = 20000;
  std::atomic<int> pending{kChanges};
  std::promise<void> all_done;
  for (int i = 0; i < kChanges; ++i) {
    inv::AdjustStockRequest a;
    a.set_sku("hot");
    a.set_mode(inv::ADJUST_MODE_SET);
    a.set_quantity(i + 2);
    server_->core().AdjustStock(a, [&](absl::StatusOr<inv::AdjustStockResponse> r) {
      EXPECT_TRUE(r.ok());
      if (--pending == 0) all_done.set_value();
    });
  }
  all_done.get_future().wait();
  int received = 0;
  bool conflated = false;
  int64_t last = 0;
  while (last != kChanges + 1 && reader->Read(&u)) {
    ++received;
    conflated |= u.conflated();
    last = u.level().on_hand();
  }
  EXPECT_EQ(last, kChanges + 1);  // the newest level arrives
  EXPECT_TRUE(conflated);
  EXPECT_LT(received, kChanges);  // not every intermediate one
  ctx->TryCancel();
  reader->Finish();
}

TEST_F(GrpcSlowReaderTest, ReaderTooFarBehindIsEndedWithResourceExhausted) {
  auto ctx = Ctx(30000);
  inv::WatchStockRequest req;  // every level
  auto reader = stub_->WatchStock(ctx.get(), req);
  inv::StockUpdate u;
  ASSERT_TRUE(reader->Read(&u));  // snapshot end of an empty store
  constexpr int kSkus = 60000;
  std::atomic<int> pending{kSkus};
  std::promise<void> all_done;
  for (int i = 0; i < kSkus; ++i) {
    inv::AdjustStockRequest a;
    a.set_sku("sku-" + std::to_string(i));
    a.set_mode(inv::ADJUST_MODE_SET);
    a.set_quantity(1);
    server_->core().AdjustStock(a, [&](absl::StatusOr<inv::AdjustStockResponse> r) {
      EXPECT_TRUE(r.ok());
      if (--pending == 0) all_done.set_value();
    });
  }
  all_done.get_future().wait();
  int received = 0;
  while (reader->Read(&u)) ++received;
  auto s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_LT(received, kSkus);
}

TEST_F(GrpcTest, FeedCarriesCommandsResultsAndLiveUpdates) {
  Adjust("f-1", 10);
  auto ctx = Ctx(10000);
  auto stream = stub_->Feed(ctx.get());
  inv::FeedRequest sub;
  sub.set_request_id("s1");
  sub.mutable_subscribe()->add_keys()->set_sku("f-1");
  sub.mutable_subscribe()->set_snapshot(true);
  ASSERT_TRUE(stream->Write(sub));
  inv::FeedResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), "s1");
  EXPECT_EQ(resp.code(), 0);
  EXPECT_EQ(resp.ack().subscriptions(), 1);
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.stock_update().kind(), inv::StockUpdate::KIND_SNAPSHOT);
  EXPECT_EQ(resp.stock_update().level().on_hand(), 10);

  inv::FeedRequest reserve;
  reserve.set_request_id("r1");
  auto* line = reserve.mutable_reserve()->mutable_request()->add_lines();
  line->set_sku("f-1");
  line->set_quantity(4);
  ASSERT_TRUE(stream->Write(reserve));
  bool got_result = false, got_update = false;
  std::string rid;
  while ((!got_result || !got_update) && stream->Read(&resp)) {
    if (resp.request_id() == "r1") {
      got_result = true;
      EXPECT_EQ(resp.code(), 0) << resp.message();
      rid = resp.reserve().reservation().reservation_id();
    } else if (resp.has_stock_update()) {
      got_update = true;
      EXPECT_EQ(resp.stock_update().level().available(), 6);
    }
  }
  ASSERT_TRUE(got_result && got_update);

  inv::FeedRequest bad;
  bad.set_request_id("b1");
  bad.mutable_reserve()->mutable_request()->add_lines()->set_sku("f-1");  // quantity 0
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), "b1");
  EXPECT_EQ(resp.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(resp.message(), HasSubstr("lines[0].quantity"));

  inv::FeedRequest commit;
  commit.set_request_id("c1");
  commit.mutable_commit()->set_reservation_id(rid);
  ASSERT_TRUE(stream->Write(commit));
  got_result = false;
  while (!got_result && stream->Read(&resp)) {
    if (resp.request_id() == "c1") {
      got_result = true;
      EXPECT_EQ(resp.code(), 0) << resp.message();
    }
  }
  inv::FeedRequest hb;
  hb.set_request_id("h1");
  hb.mutable_heartbeat()->set_client_time_ms(1);
  ASSERT_TRUE(stream->Write(hb));
  ASSERT_TRUE(stream->WritesDone());
  bool heartbeat_acked = false;
  while (stream->Read(&resp)) heartbeat_acked |= resp.request_id() == "h1";
  EXPECT_TRUE(heartbeat_acked);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(Level("f-1").on_hand(), 6);
}

TEST_F(GrpcTest, FeedBatchesCommandsAndResultsInOneMessage) {
  Adjust("fb-1", 100);
  auto ctx = Ctx(10000);
  auto stream = stub_->Feed(ctx.get());
  // One message: 200 reserves of 1 unit, an invalid one, a nested batch, a heartbeat.
  inv::FeedRequest batch;
  auto reserve = [](inv::FeedRequest* r, const std::string& id, int64_t qty) {
    r->set_request_id(id);
    auto* line = r->mutable_reserve()->mutable_request()->add_lines();
    line->set_sku("fb-1");
    line->set_quantity(qty);
  };
  reserve(&batch, "r0", 1);
  for (int i = 1; i < 200; ++i) reserve(batch.add_more(), "r" + std::to_string(i), 1);
  reserve(batch.add_more(), "bad", 0);
  auto* nested = batch.add_more();
  reserve(nested, "nested", 1);
  reserve(nested->add_more(), "nested-inner", 1);
  auto* hb = batch.add_more();
  hb->set_request_id("hb");
  hb->mutable_heartbeat();
  ASSERT_TRUE(stream->Write(batch));
  ASSERT_TRUE(stream->WritesDone());

  std::map<std::string, inv::FeedResponse> results;
  int messages = 0;
  inv::FeedResponse resp;
  while (stream->Read(&resp)) {
    if (resp.has_stock_update()) continue;
    ++messages;
    std::vector<inv::FeedResponse> all{resp};
    all.insert(all.end(), resp.more().begin(), resp.more().end());
    for (auto& r : all) {
      EXPECT_TRUE(results.emplace(r.request_id(), r).second)
          << "two results for " << r.request_id();
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  // Exactly one result per command, none for the inner command of the refused nested batch.
  ASSERT_EQ(results.size(), 203u);
  // 100 units for 200 one-unit reserves, in order: the first 100 held, the rest sold out.
  for (int i = 0; i < 200; ++i) {
    const auto& r = results["r" + std::to_string(i)];
    if (i < 100) {
      EXPECT_EQ(r.code(), 0) << i << ": " << r.message();
      EXPECT_EQ(r.reserve().reservation().state(), inv::RESERVATION_STATE_HELD);
    } else {
      EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION)) << i;
    }
  }
  EXPECT_EQ(results["bad"].code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(results["bad"].message(), HasSubstr("lines[0].quantity"));
  EXPECT_EQ(results["nested"].code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(results["nested"].message(), HasSubstr("more"));
  EXPECT_EQ(results.count("nested-inner"), 0u);
  EXPECT_EQ(results["hb"].code(), 0);
  // A batching client gets its results packed: far fewer messages than results.
  EXPECT_LT(messages, 100) << "results were not packed";
  EXPECT_EQ(Level("fb-1").reserved(), 100);
}

TEST_F(GrpcTest, FeedRefusesAMessageWithMoreCommandsThanTheLimit) {
  const int limit = config_.feed_max_inflight_commands;
  auto ctx = Ctx(10000);
  auto stream = stub_->Feed(ctx.get());
  inv::FeedRequest batch;
  batch.set_request_id("h0");
  batch.mutable_heartbeat();
  for (int i = 1; i <= limit; ++i) {
    auto* m = batch.add_more();
    m->set_request_id("h" + std::to_string(i));
    m->mutable_heartbeat();
  }
  ASSERT_TRUE(stream->Write(batch));
  ASSERT_TRUE(stream->WritesDone());
  int refused = 0, total = 0;
  inv::FeedResponse resp;
  while (stream->Read(&resp)) {
    std::vector<inv::FeedResponse> all{resp};
    all.insert(all.end(), resp.more().begin(), resp.more().end());
    for (auto& r : all) {
      ++total;
      if (r.code() == static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT) &&
          r.message().find("more:") != std::string::npos) {
        ++refused;
      }
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(total, limit + 1);
  EXPECT_EQ(refused, limit + 1);
}

TEST_F(GrpcTest, LeasedHoldIsReleasedWhenTheFeedStreamGoesAway) {
  Adjust("lease", 5);
  {
    auto ctx = Ctx(10000);
    auto stream = stub_->Feed(ctx.get());
    inv::FeedRequest reserve;
    reserve.set_request_id("r");
    reserve.mutable_reserve()->set_lease_to_stream(true);
    auto* line = reserve.mutable_reserve()->mutable_request()->add_lines();
    line->set_sku("lease");
    line->set_quantity(3);
    ASSERT_TRUE(stream->Write(reserve));
    inv::FeedResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    ASSERT_EQ(resp.code(), 0) << resp.message();
    EXPECT_EQ(Level("lease").available(), 2);
    ctx->TryCancel();  // the client disappears without committing
    stream->Finish();
  }
  for (int i = 0; i < 100 && Level("lease").available() != 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Level("lease").available(), 5);
  EXPECT_EQ(Level("lease").reserved(), 0);
}

TEST_F(GrpcTest, HundredClientsRaceForTheLastUnitsWithoutOversell) {
  Adjust("last", 100);
  constexpr int kClients = 100;
  std::atomic<int> won{0}, lost{0}, other{0};
  std::mutex other_mu;
  std::string other_statuses;  // what the calls that neither won nor lost returned
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      // Each client has its own channel: 100 real connections.
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", c);
      auto channel =
          grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args);
      auto stub = inv::InventoryService::NewStub(channel);
      for (int i = 0; i < 5; ++i) {
        inv::ReserveRequest req;
        auto* line = req.add_lines();
        line->set_sku("last");
        line->set_quantity(1);
        inv::ReserveResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        // 100 channels connect at once; on a busy machine one connect attempt can fail
        // ("failed to connect to all addresses") and, without this, fail every call of that
        // channel at once. A checkout client waits for the connection within its deadline.
        ctx.set_wait_for_ready(true);
        auto s = stub->Reserve(&ctx, req, &resp);
        if (s.ok()) {
          ++won;
        } else if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
          ++lost;
        } else {
          ++other;
          std::lock_guard lock(other_mu);
          other_statuses +=
              std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message() + "; ";
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(won.load(), 100);
  EXPECT_EQ(lost.load(), kClients * 5 - 100);
  EXPECT_EQ(other.load(), 0) << other_statuses;
  auto level = Level("last");
  EXPECT_EQ(level.reserved(), 100);
  EXPECT_EQ(level.available(), 0);
}

TEST_F(GrpcTest, HealthIsServing) {
  grpc::ClientContext ctx;
  // grpc.health.v1.HealthCheckRequest{service=""} serializes to zero bytes.
  grpc::Slice empty(std::string(""));
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::GenericStub generic(channel_);
  grpc::Status status;
  std::promise<void> done;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      status = s;
                      done.set_value();
                    });
  done.get_future().wait();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING

  // Reflection is exercised with grpcurl by tests/e2e/readme_commands_test.sh.
}

TEST_F(GrpcTest, GracefulShutdownFinishesInFlightCallsAndEndsStreams) {
  Adjust("sd", 1'000'000);
  auto watch_ctx = Ctx(20000);
  inv::WatchStockRequest req;
  req.add_keys()->set_sku("sd");
  auto reader = stub_->WatchStock(watch_ctx.get(), req);
  inv::StockUpdate u;
  ASSERT_TRUE(reader->Read(&u));
  std::atomic<int> ok{0}, unavailable{0}, cancelled{0}, other{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        inv::ReserveResponse resp;
        auto s = Reserve("sd", 1, &resp);
        if (s.ok()) {
          ++ok;
        } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
          ++unavailable;
          return;
        } else if (s.error_code() == grpc::StatusCode::CANCELLED) {
          // A call that raced with the shutdown: gRPC refused it, or cancelled it after it
          // was queued (ambiguous for the client, which retries with the same key).
          ++cancelled;
          return;
        } else {
          ++other;
          ADD_FAILURE() << "unexpected " << s.error_code() << " " << s.error_message();
          return;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->Shutdown();
  stop = true;
  for (auto& t : clients) t.join();
  while (reader->Read(&u)) {
  }
  auto s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(other.load(), 0);

  // Every acknowledged reservation is in the store after a restart.
  server_.reset();
  StartServer();
  EXPECT_GE(Level("sd").reserved(), ok.load());
  EXPECT_LE(Level("sd").reserved(), ok.load() + cancelled.load());
}

// The seed contract client is a separate binary: its order.v1 messages would clash with
// ours inside one process.
TEST_F(GrpcTest, SeedContractClientWorksUnchanged) {
  Adjust("sku-101", 5);
  Adjust("sku-202", 5);
  auto run = [&](const std::string& args) {
    std::string cmd = std::string(SEED_CLIENT_PATH) + " " + server_->address() + " " + args;
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    int rc = pclose(p);
    return std::make_pair(WEXITSTATUS(rc), out);
  };
  auto [rc, out] = run("create cust-441 sku-101 sku-202");
  ASSERT_EQ(rc, 0) << out;
  std::istringstream in(out);
  std::string order_id, status;
  int64_t ts = 0;
  in >> order_id >> status >> ts;
  EXPECT_EQ(status, "CONFIRMED");
  EXPECT_GT(ts, 1'600'000'000);
  EXPECT_EQ(Level("sku-101").reserved(), 1);

  const size_t listeners = server_->core().change_feed().listeners();
  auto stream = std::async(std::launch::async, [&] { return run("stream " + order_id); });
  // The client is another process: wait until its stream has attached to the change feed
  // (a fixed 300 ms was not enough under TSan, where it then saw only the final status).
  for (int i = 0; i < 1000 && server_->core().change_feed().listeners() == listeners; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(server_->core().change_feed().listeners(), listeners) << "the stream never attached";
  ord::OrderResponse out_resp;
  ord::PayOrderRequest pay;
  pay.set_order_id(order_id);
  ASSERT_TRUE(orders_->PayOrder(Ctx().get(), pay, &out_resp).ok());
  for (auto target :
       {ord::ORDER_STATUS_PACKING, ord::ORDER_STATUS_DISPATCHED, ord::ORDER_STATUS_DELIVERED}) {
    ord::AdvanceOrderRequest adv;
    adv.set_order_id(order_id);
    adv.set_target(target);
    ASSERT_TRUE(orders_->AdvanceOrder(Ctx().get(), adv, &out_resp).ok());
  }
  auto [src, sout] = stream.get();
  EXPECT_EQ(src, 0);
  EXPECT_THAT(sout, HasSubstr("CONFIRMED|"));
  EXPECT_THAT(sout, HasSubstr("PACKING|order progressed to PACKING"));
  EXPECT_THAT(sout, HasSubstr("DELIVERED|"));

  auto [bad_rc, bad_out] = run("create cust-1 no-such-sku");
  EXPECT_EQ(bad_rc, 10 + static_cast<int>(grpc::StatusCode::NOT_FOUND));
  Adjust("sku-short", 0);
  auto [short_rc, short_out] = run("create cust-1 sku-short");
  EXPECT_EQ(short_rc, 10 + static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
}

}  // namespace
}  // namespace feed

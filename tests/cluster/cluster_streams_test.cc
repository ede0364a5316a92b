// Streams in cluster mode (label `cluster`): WatchStock and StreamOrderUpdates are served by
// the owner of their shard, like unary calls; another node answers UNAVAILABLE with the owner
// in `feed-shard-owner`; a watch of every SKU or of several shards is refused. A Feed stream
// serves the one shard its `feed-shard` metadata names, on the shard's owner.
// When the owner dies, a client resumes on the next owner from the last sequence it received
// and gets every change after it once, in order (the next owner's core continues the same
// sequence: it recovers from the same log). When a live node gives a shard up (a restarted
// node takes it back), that shard's streams end with UNAVAILABLE and the others go on.
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"
#include "three_node_cluster.h"

namespace feed::cluster_test {
namespace {

namespace ord = ::order::v1;

// The owner a refused stream names in its trailing metadata, or "".
std::string OwnerNamedIn(const grpc::ClientContext& ctx) {
  auto it = ctx.GetServerTrailingMetadata().find("feed-shard-owner");
  if (it == ctx.GetServerTrailingMetadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// One WatchStock call, read with a deadline that bounds the whole test step.
struct Watch {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<inv::StockUpdate>> reader;
  bool finished = false;

  ~Watch() { Cancel(); }
  // The next update; false when the stream ended (then Ended() is its status).
  bool Next(inv::StockUpdate* update) { return reader->Read(update); }
  grpc::Status Ended() {
    finished = true;
    return reader->Finish();
  }
  void Cancel() {
    if (finished || !reader) return;
    ctx.TryCancel();
    for (inv::StockUpdate u; reader->Read(&u);) {
    }
    Ended();
  }
  std::string Owner() const { return OwnerNamedIn(ctx); }
};

class ClusterStreamsTest : public ThreeNodeCluster {
 protected:
  std::unique_ptr<Watch> OpenWatch(const std::string& address, inv::WatchStockRequest request) {
    auto watch = std::make_unique<Watch>();
    watch->ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    watch->reader = client_->Stub(address).WatchStock(&watch->ctx, request);
    return watch;
  }
  std::unique_ptr<Watch> WatchSku(const std::string& address, const std::string& sku,
                                  uint64_t resume_after = 0) {
    inv::WatchStockRequest request;
    request.add_sku(sku);
    request.set_resume_after_sequence(resume_after);
    return OpenWatch(address, request);
  }
  // Reads the snapshot of one level; its cut's sequence.
  uint64_t ReadSnapshot(Watch& watch, const std::string& sku) {
    inv::StockUpdate u;
    EXPECT_TRUE(watch.Next(&u));
    EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT);
    EXPECT_EQ(u.level().sku(), sku);
    EXPECT_TRUE(watch.Next(&u));
    EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT_END);
    return u.sequence();
  }
  void ReserveOne(const std::string& sku, const std::string& key) {
    inv::ReserveResponse out;
    grpc::Status s = client_->Reserve(sku, 1, key, &out, 40s);
    ASSERT_TRUE(s.ok()) << key << ": " << s.error_message();
  }
  // Reads `n` changes of `sku`: sequences and versions rising, one reserved unit more each.
  void ExpectChanges(Watch& watch, const std::string& sku, int n, uint64_t* last_sequence,
                     int64_t* reserved) {
    for (int i = 0; i < n; ++i) {
      inv::StockUpdate u;
      ASSERT_TRUE(watch.Next(&u)) << "change " << i << " of " << n << ": " << Ended(watch);
      EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_CHANGE);
      EXPECT_EQ(u.level().sku(), sku);
      EXPECT_GT(u.sequence(), *last_sequence);
      EXPECT_EQ(u.level().reserved(), *reserved + 1) << "a change missed or repeated";
      EXPECT_EQ(u.level().available(), kStock - u.level().reserved());
      *last_sequence = u.sequence();
      *reserved = u.level().reserved();
    }
  }
  static std::string Ended(Watch& watch) { return watch.Ended().error_message(); }
  std::string AddressOf(int node) { return nodes_[static_cast<size_t>(node)]->address(); }
  int OtherThan(int node) { return (node + 1) % kNodes; }
};

TEST_F(ClusterStreamsTest, StreamsFollowTheirShardsOwnerAndResumeOnTheNextOneWithoutAGap) {
  Stock();
  const std::string sku = Sku(0);
  const uint32_t shard = cluster::ShardOf(sku, kShards);
  const int owner = OwnerOf(shard);
  ASSERT_GE(owner, 0);

  // Another node names the owner; a watch that spans shards is refused.
  {
    auto elsewhere = WatchSku(AddressOf(OtherThan(owner)), sku);
    inv::StockUpdate u;
    EXPECT_FALSE(elsewhere->Next(&u));
    grpc::Status s = elsewhere->Ended();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_EQ(elsewhere->Owner(), AddressOf(owner));

    auto everything = OpenWatch(AddressOf(owner), inv::WatchStockRequest());
    EXPECT_FALSE(everything->Next(&u));
    s = everything->Ended();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(s.error_message().find("keys: in cluster mode"), std::string::npos);

    // Every SKU of one shard: the metadata names it; the snapshot holds that shard's levels.
    Watch whole_shard;
    whole_shard.ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    whole_shard.ctx.AddMetadata("feed-shard", std::to_string(shard));
    whole_shard.reader =
        client_->Stub(AddressOf(owner)).WatchStock(&whole_shard.ctx, inv::WatchStockRequest());
    int levels = 0;
    while (whole_shard.Next(&u) && u.kind() == inv::StockUpdate::KIND_SNAPSHOT) {
      EXPECT_EQ(cluster::ShardOf(u.level().sku(), kShards), shard) << u.level().sku();
      ++levels;
    }
    EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT_END);
    int expected = 0;
    for (int i = 0; i < kSkus; ++i) expected += cluster::ShardOf(Sku(i), kShards) == shard;
    EXPECT_EQ(levels, expected);
    whole_shard.Cancel();
    Watch not_owner;
    not_owner.ctx.AddMetadata("feed-shard", std::to_string(shard));
    not_owner.reader = client_->Stub(AddressOf(OtherThan(owner)))
                           .WatchStock(&not_owner.ctx, inv::WatchStockRequest());
    EXPECT_FALSE(not_owner.Next(&u));
    s = not_owner.Ended();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_EQ(not_owner.Owner(), AddressOf(owner));
  }

  // The owner serves the watch: snapshot, then each acknowledged reservation once, in order.
  auto watch = WatchSku(AddressOf(owner), sku);
  uint64_t last = ReadSnapshot(*watch, sku);
  int64_t reserved = 0;
  for (int i = 0; i < 5; ++i) ReserveOne(sku, "before-" + std::to_string(i));
  ExpectChanges(*watch, sku, 5, &last, &reserved);

  // An order of the shard: its status stream is the owner's too.
  auto orders = ord::OrderService::NewStub(
      grpc::CreateChannel(AddressOf(owner), grpc::InsecureChannelCredentials()));
  ord::CreateOrderResponse created;
  {
    grpc::ClientContext ctx;
    ord::CreateOrderRequest r;
    r.set_customer_id("customer-1");
    r.add_item_ids(sku);
    r.set_idempotency_key("order-1");
    ASSERT_TRUE(orders->CreateOrder(&ctx, r, &created).ok());
    ++reserved;  // the order holds one unit
  }
  {
    grpc::ClientContext ctx;
    ord::OrderSubscriptionRequest r;
    r.set_order_id(created.order_id());
    auto other = ord::OrderService::NewStub(
        grpc::CreateChannel(AddressOf(OtherThan(owner)), grpc::InsecureChannelCredentials()));
    auto refused = other->StreamOrderUpdates(&ctx, r);
    ord::OrderStatusUpdate u;
    EXPECT_FALSE(refused->Read(&u));
    EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    ord::OrderSubscriptionRequest r;
    r.set_order_id(created.order_id());
    auto stream = orders->StreamOrderUpdates(&ctx, r);
    ord::OrderStatusUpdate u;
    ASSERT_TRUE(stream->Read(&u));
    EXPECT_EQ(u.order_id(), created.order_id());
    EXPECT_EQ(u.status_code(), created.status_code());
    ctx.TryCancel();
    while (stream->Read(&u)) {
    }
    stream->Finish();
  }

  // The client stops reading; three more are acknowledged; then the owner dies.
  inv::StockUpdate order_change;
  ASSERT_TRUE(watch->Next(&order_change));  // the order's hold
  EXPECT_EQ(order_change.level().reserved(), reserved);
  last = order_change.sequence();
  watch.reset();
  for (int i = 0; i < 3; ++i) ReserveOne(sku, "unread-" + std::to_string(i));
  nodes_[static_cast<size_t>(owner)]->Kill();
  ASSERT_TRUE(WaitForAllShardsServed(60s)) << "no new owner for the dead node's shards";
  const int next = OwnerOf(shard);
  ASSERT_GE(next, 0);
  ASSERT_NE(next, owner);

  // Resumed on the next owner after the last sequence received: the three unread changes,
  // then live ones, each once and in order.
  auto resumed = WatchSku(AddressOf(next), sku, last);
  ExpectChanges(*resumed, sku, 3, &last, &reserved);
  for (int i = 0; i < 2; ++i) ReserveOne(sku, "after-" + std::to_string(i));
  ExpectChanges(*resumed, sku, 2, &last, &reserved);
  EXPECT_EQ(reserved, 11);
  resumed->Cancel();

  // Every shard watched on its owner; the dead node comes back and takes shards back from
  // live nodes: the streams of the shards that moved end with UNAVAILABLE, the others go on.
  std::map<uint32_t, int> owner_before;
  std::map<uint32_t, std::unique_ptr<Watch>> watches;
  for (uint32_t s = 0; s < kShards; ++s) {
    owner_before[s] = OwnerOf(s);
    watches[s] = WatchSku(AddressOf(owner_before[s]), SkuOn(s));
    ReadSnapshot(*watches[s], SkuOn(s));
  }
  ASSERT_TRUE(nodes_[static_cast<size_t>(owner)]->Start());
  ASSERT_TRUE(WaitForAllShardsServed(60s)) << "the restarted node got no shard";
  int moved = 0;
  for (uint32_t s = 0; s < kShards; ++s) {
    Watch& w = *watches[s];
    if (OwnerOf(s) != owner_before[s]) {
      ++moved;
      inv::StockUpdate u;
      EXPECT_FALSE(w.Next(&u)) << "shard " << s << " moved but its stream goes on";
      grpc::Status ended = w.Ended();
      EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE) << ended.error_message();
      EXPECT_NE(ended.error_message().find("no longer served by this node"), std::string::npos)
          << ended.error_message();
    } else {
      const std::string s_sku = SkuOn(s);
      uint64_t s_last = 0;
      int64_t s_reserved = s_sku == sku ? reserved : 0;
      ReserveOne(s_sku, "still-" + std::to_string(s));
      ExpectChanges(w, s_sku, 1, &s_last, &s_reserved);
      w.Cancel();
    }
  }
  EXPECT_GT(moved, 0) << "no shard moved back to the restarted node";
}

// One Feed call; `shard` empty: no feed-shard metadata.
struct FeedCall {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<inv::FeedRequest, inv::FeedResponse>> stream;

  FeedCall(inv::InventoryService::Stub& stub, const std::string& shard) {
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    if (!shard.empty()) ctx.AddMetadata("feed-shard", shard);
    stream = stub.Feed(&ctx);
  }
  // The status of a stream the server ends at once.
  grpc::Status Refused() {
    inv::FeedResponse r;
    EXPECT_FALSE(stream->Read(&r));
    return stream->Finish();
  }
  std::string Owner() const { return OwnerNamedIn(ctx); }
};

TEST_F(ClusterStreamsTest, AFeedStreamServesTheShardItNamesOnTheShardsOwner) {
  Stock();
  const std::string sku = Sku(0);
  const uint32_t shard = cluster::ShardOf(sku, kShards);
  const int owner = OwnerOf(shard);
  ASSERT_GE(owner, 0);
  const std::string other_sku = SkuOn((shard + 1) % kShards);
  auto& owner_stub = client_->Stub(AddressOf(owner));

  // Without feed-shard, with one that is not a shard, and on a node that does not own it.
  {
    FeedCall unnamed(owner_stub, "");
    grpc::Status s = unnamed.Refused();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_NE(s.error_message().find("feed-shard: in cluster mode"), std::string::npos);
    FeedCall word(owner_stub, "two");
    s = word.Refused();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("feed-shard: 'two' is not a shard number"), std::string::npos);
    FeedCall beyond(owner_stub, std::to_string(kShards));
    s = beyond.Refused();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("is not a shard of this cluster"), std::string::npos);
    FeedCall elsewhere(client_->Stub(AddressOf(OtherThan(owner))), std::to_string(shard));
    s = elsewhere.Refused();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_EQ(elsewhere.Owner(), AddressOf(owner));
  }

  // On the owner: a subscription with its snapshot, a leased reservation and its commit;
  // a reservation and a subscription of another shard are refused on their own.
  FeedCall feed(owner_stub, std::to_string(shard));
  auto command = [&](const std::string& id) {
    inv::FeedRequest r;
    r.set_request_id(id);
    return r;
  };
  inv::FeedRequest subscribe = command("subscribe");
  subscribe.mutable_subscribe()->add_keys()->set_sku(sku);
  subscribe.mutable_subscribe()->set_snapshot(true);
  inv::FeedRequest reserve = command("reserve");
  auto* line = reserve.mutable_reserve()->mutable_request()->add_lines();
  line->set_sku(sku);
  line->set_quantity(2);
  reserve.mutable_reserve()->set_lease_to_stream(true);
  inv::FeedRequest elsewhere = command("elsewhere");
  auto* other_line = elsewhere.mutable_reserve()->mutable_request()->add_lines();
  other_line->set_sku(other_sku);
  other_line->set_quantity(1);
  inv::FeedRequest other_subscribe = command("other-subscribe");
  other_subscribe.mutable_subscribe()->add_keys()->set_sku(other_sku);
  for (const auto* r : {&subscribe, &reserve, &elsewhere, &other_subscribe}) {
    ASSERT_TRUE(feed.stream->Write(*r));
  }
  std::map<std::string, inv::FeedResponse> results;
  std::vector<inv::StockUpdate> updates;
  auto read_until = [&](const std::string& id) {
    inv::FeedResponse r;
    while (results.count(id) == 0 && feed.stream->Read(&r)) {
      if (r.has_stock_update()) {
        updates.push_back(r.stock_update());
      } else {
        results[r.request_id()] = r;
      }
    }
    ASSERT_EQ(results.count(id), 1u) << "no result for " << id;
  };
  for (const char* id : {"subscribe", "reserve", "elsewhere", "other-subscribe"}) read_until(id);
  EXPECT_EQ(results["subscribe"].code(), 0) << results["subscribe"].message();
  ASSERT_EQ(results["reserve"].code(), 0) << results["reserve"].message();
  const std::string rid = results["reserve"].reserve().reservation().reservation_id();
  EXPECT_EQ(rid.rfind("rsv-s" + std::to_string(shard) + "-", 0), 0u) << rid;
  for (const char* id : {"elsewhere", "other-subscribe"}) {
    EXPECT_EQ(results[id].code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION)) << id;
    EXPECT_NE(results[id].message().find("this stream serves shard " + std::to_string(shard)),
              std::string::npos)
        << results[id].message();
  }
  inv::FeedRequest commit = command("commit");
  commit.mutable_commit()->set_reservation_id(rid);
  ASSERT_TRUE(feed.stream->Write(commit));
  read_until("commit");
  EXPECT_EQ(results["commit"].code(), 0) << results["commit"].message();
  // The snapshot first, then changes in sequence order up to the commit's (a reader behind
  // gets a key's changes conflated, so how many arrive in between varies).
  auto committed = [&] {
    return !updates.empty() && updates.back().level().on_hand() == kStock - 2 &&
           updates.back().level().reserved() == 0;
  };
  inv::FeedResponse r;
  while (!committed() && feed.stream->Read(&r)) {
    if (r.has_stock_update()) updates.push_back(r.stock_update());
  }
  ASSERT_TRUE(committed()) << updates.size() << " updates, none after the commit";
  EXPECT_EQ(updates[0].kind(), inv::StockUpdate::KIND_SNAPSHOT);
  for (const auto& u : updates) EXPECT_EQ(u.level().sku(), sku);
  for (size_t i = 1; i < updates.size(); ++i) {
    EXPECT_GT(updates[i].sequence(), updates[i - 1].sequence());
  }
  feed.stream->WritesDone();
  while (feed.stream->Read(&r)) {
  }
  grpc::Status ended = feed.stream->Finish();
  EXPECT_TRUE(ended.ok()) << ended.error_message();

  // A hold leased to a stream of the shard is released when that stream is cancelled.
  std::string leased;
  {
    FeedCall second(owner_stub, std::to_string(shard));
    inv::FeedRequest hold = reserve;
    hold.set_request_id("leased");
    ASSERT_TRUE(second.stream->Write(hold));
    while (second.stream->Read(&r) && r.request_id() != "leased") {
    }
    ASSERT_EQ(r.request_id(), "leased");
    ASSERT_EQ(r.code(), 0) << r.message();
    leased = r.reserve().reservation().reservation_id();
    second.ctx.TryCancel();
    while (second.stream->Read(&r)) {
    }
    second.stream->Finish();
  }
  inv::ReservationState state = inv::RESERVATION_STATE_UNSPECIFIED;
  for (int i = 0; i < 100 && state != inv::RESERVATION_STATE_RELEASED; ++i) {
    grpc::ClientContext ctx;
    inv::GetReservationRequest get;
    get.set_reservation_id(leased);
    inv::Reservation out;
    grpc::Status s = owner_stub.GetReservation(&ctx, get, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
    state = out.state();
    if (state != inv::RESERVATION_STATE_RELEASED) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(state, inv::RESERVATION_STATE_RELEASED) << leased;
}

}  // namespace
}  // namespace feed::cluster_test

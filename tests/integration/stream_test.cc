// What a stream promises, tried over real gRPC: a resume replays every change after its
// sequence one by one, a reader that keeps up gets every change, a snapshot is a consistent
// cut that changes follow in sequence order, holds leased to a Feed stream are released
// whenever the stream ends, and bytes that are not a valid request get a clear error.
//
// The binary has its own main: `stream_test --lease-client ADDRESS SKU` is the Feed client
// that the kill test starts as a child process and SIGKILLs.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpc_fixture.h"
#include "grpcpp/generic/generic_stub.h"

extern char** environ;

namespace feed {
namespace {

using test::GrpcTest;
using ::testing::HasSubstr;
namespace inv = inventory::v1;
namespace ord = order::v1;

class StreamTest : public GrpcTest {
 protected:
  // The count rule only (--stream-conflate-after): these readers keep up, and a write that
  // a busy test machine holds up for more than --stream-conflate-after-ms would make the
  // server treat them as behind (that rule has its unit test in stock_update_queue_test).
  void Customize(server::ServerConfig& c) override { c.stream_conflate_after_ms = 0; }

  inv::AdjustStockResponse Change(const std::string& sku, inv::AdjustMode mode, int64_t qty) {
    inv::AdjustStockRequest req;
    req.set_sku(sku);
    req.set_mode(mode);
    req.set_quantity(qty);
    inv::AdjustStockResponse resp;
    auto status = stub_->AdjustStock(Ctx().get(), req, &resp);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return resp;
  }
  uint64_t Set(const std::string& sku, int64_t qty) {
    return Change(sku, inv::ADJUST_MODE_SET, qty).sequence();
  }
  uint64_t Delta(const std::string& sku, int64_t qty) {
    return Change(sku, inv::ADJUST_MODE_DELTA, qty).sequence();
  }

  // `n` changes submitted to the core at once, so that they commit and are published
  // together (one batch), then waits for all of them.
  void DeltasAtOnce(const std::string& sku, int n) {
    std::atomic<int> pending{n};
    std::promise<void> all_done;
    for (int i = 0; i < n; ++i) {
      inv::AdjustStockRequest a;
      a.set_sku(sku);
      a.set_mode(inv::ADJUST_MODE_DELTA);
      a.set_quantity(1);
      server_->core().AdjustStock(a, [&](absl::StatusOr<inv::AdjustStockResponse> r) {
        EXPECT_TRUE(r.ok()) << r.status();
        if (--pending == 0) all_done.set_value();
      });
    }
    all_done.get_future().wait();
  }

  static inv::WatchStockRequest Watch(const std::vector<std::string>& skus,
                                      uint64_t resume_after = 0) {
    inv::WatchStockRequest req;
    for (const auto& s : skus) req.add_keys()->set_sku(s);
    req.set_resume_after_sequence(resume_after);
    return req;
  }

  // Writers that change `skus` (DELTA +1 each call) over gRPC until stopped.
  class BackgroundWrites {
   public:
    BackgroundWrites(StreamTest* t, std::vector<std::string> skus, int threads) {
      for (int i = 0; i < threads; ++i) {
        threads_.emplace_back([this, t, skus, i] {
          auto stub = inv::InventoryService::NewStub(t->channel_);
          for (uint64_t n = 0; !stop_ && n < 2'000'000; ++n) {
            inv::AdjustStockRequest req;
            req.set_sku(skus[(n + i) % skus.size()]);
            req.set_mode(inv::ADJUST_MODE_DELTA);
            req.set_quantity(1);
            inv::AdjustStockResponse resp;
            grpc::ClientContext ctx;
            ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
            if (!stub->AdjustStock(&ctx, req, &resp).ok()) return;
          }
        });
      }
    }
    ~BackgroundWrites() {
      stop_ = true;
      for (auto& t : threads_) t.join();
    }

   private:
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
  };
};

// The rule every stock stream keeps, checked update by update: sequences only go up (every
// change of the watched SKUs arrives, so they go up by one), a level's version only goes up
// (by one: no change of it was merged), and nothing is marked conflated.
class StreamChecker {
 public:
  explicit StreamChecker(uint64_t after) : last_sequence_(after) {}
  void Snapshot(const inv::StockUpdate& u) {
    versions_[u.level().sku()] = u.level().version();
    snapshot_sequence_ = u.sequence();
  }
  void SnapshotEnd(const inv::StockUpdate& u) {
    EXPECT_EQ(u.sequence(), snapshot_sequence_.value_or(u.sequence()));
    last_sequence_ = u.sequence();
  }
  void Change(const inv::StockUpdate& u) {
    EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_CHANGE);
    EXPECT_EQ(u.sequence(), last_sequence_ + 1)
        << "after " << last_sequence_ << " came " << u.sequence() << " (" << u.level().sku() << " v"
        << u.level().version() << ")";
    last_sequence_ = u.sequence();
    auto it = versions_.find(u.level().sku());
    if (it != versions_.end()) {
      EXPECT_EQ(u.level().version(), it->second + 1)
          << u.level().sku() << " went from v" << it->second << " to v" << u.level().version();
    }
    versions_[u.level().sku()] = u.level().version();
    EXPECT_FALSE(u.conflated()) << "a reader that keeps up got a merged update";
  }

 private:
  uint64_t last_sequence_;
  std::optional<uint64_t> snapshot_sequence_;
  std::map<std::string, uint64_t> versions_;
};

TEST_F(StreamTest, ResumeReplaysEveryMissedChangeOneByOne) {
  const uint64_t first = Set("rs-1", 10);
  for (int i = 0; i < 5; ++i) Delta("rs-1", 1);
  auto ctx = Ctx();
  auto reader = stub_->WatchStock(ctx.get(), Watch({"rs-1"}, first));
  inv::StockUpdate u;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(reader->Read(&u)) << "replayed " << i << " of 5";
    EXPECT_EQ(u.kind(), inv::StockUpdate::KIND_CHANGE);
    EXPECT_EQ(u.level().version(), static_cast<uint64_t>(2 + i));
    EXPECT_EQ(u.level().on_hand(), 11 + i);
    EXPECT_EQ(u.sequence(), first + 1 + i);
    EXPECT_FALSE(u.conflated());
  }
  // Then live, with no gap and no duplicate.
  const uint64_t live = Delta("rs-1", 1);
  ASSERT_TRUE(reader->Read(&u));
  EXPECT_EQ(u.sequence(), live);
  EXPECT_EQ(u.level().version(), 7u);
  ctx->TryCancel();
  reader->Finish();
}

TEST_F(StreamTest, ResumeAcrossLevelsArrivesInSequenceOrder) {
  const uint64_t from = Set("rx-a", 0);
  Set("rx-b", 0);
  Set("rx-c", 0);
  for (int round = 0; round < 10; ++round) {
    for (const char* sku : {"rx-c", "rx-a", "rx-b"}) Delta(sku, 1);
  }
  auto ctx = Ctx();
  auto reader = stub_->WatchStock(ctx.get(), Watch({"rx-a", "rx-b", "rx-c"}, from));
  StreamChecker check(from);
  inv::StockUpdate u;
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(reader->Read(&u)) << "replayed " << i << " of 32";
    check.Change(u);
  }
  ctx->TryCancel();
  reader->Finish();
}

TEST_F(StreamTest, AResumeFromASequenceNotYetPublishedSkipsWhatTheClientHasSeen) {
  // A client may hold a sequence from a reply before the change feed has published it.
  const uint64_t seen = Set("rp-1", 1);
  auto ctx = Ctx();
  auto reader = stub_->WatchStock(ctx.get(), Watch({"rp-1"}, seen + 1));
  Delta("rp-1", 1);  // seen + 1: the client already has it
  const uint64_t next = Delta("rp-1", 1);
  inv::StockUpdate u;
  ASSERT_TRUE(reader->Read(&u));
  EXPECT_EQ(u.sequence(), next);
  ctx->TryCancel();
  reader->Finish();
}

TEST_F(StreamTest, AReaderThatKeepsUpGetsEveryChangeEvenWhenTheyArePublishedTogether) {
  Set("kp-1", 0);
  auto ctx = Ctx(30000);
  auto reader = stub_->WatchStock(ctx.get(), Watch({"kp-1"}));
  inv::StockUpdate u;
  ASSERT_TRUE(reader->Read(&u));
  ASSERT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT);
  StreamChecker check(0);
  check.Snapshot(u);
  ASSERT_TRUE(reader->Read(&u));
  ASSERT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT_END);
  check.SnapshotEnd(u);
  for (int round = 0; round < 20; ++round) {
    DeltasAtOnce("kp-1", 30);
    for (int i = 0; i < 30; ++i) {
      ASSERT_TRUE(reader->Read(&u)) << "round " << round << ", change " << i;
      check.Change(u);
    }
    if (HasFailure()) break;
  }
  ctx->TryCancel();
  reader->Finish();
}

TEST_F(StreamTest, ASnapshotIsAConsistentCutAndChangesFollowItUnderConcurrentWrites) {
  const std::vector<std::string> skus = {"cc-1", "cc-2", "cc-3", "cc-4"};
  for (const auto& s : skus) Set(s, 0);
  BackgroundWrites writes(this, skus, 3);
  for (int i = 0; i < 300 && !HasFailure(); ++i) {
    auto ctx = Ctx();
    auto reader = stub_->WatchStock(ctx.get(), Watch(skus));
    StreamChecker check(0);
    inv::StockUpdate u;
    int rows = 0;
    while (true) {
      ASSERT_TRUE(reader->Read(&u)) << reader->Finish().error_message();
      if (u.kind() == inv::StockUpdate::KIND_SNAPSHOT_END) break;
      ASSERT_EQ(u.kind(), inv::StockUpdate::KIND_SNAPSHOT)
          << "subscribe " << i << ": a change (v" << u.level().version() << " of "
          << u.level().sku() << ") before the end of the snapshot";
      check.Snapshot(u);
      ++rows;
    }
    EXPECT_EQ(rows, 4);
    check.SnapshotEnd(u);
    for (int c = 0; c < 8; ++c) {
      ASSERT_TRUE(reader->Read(&u));
      check.Change(u);
    }
    ctx->TryCancel();
    reader->Finish();
  }
}

TEST_F(StreamTest, AResumeUnderConcurrentWritesNeverGoesBackNorSkips) {
  const std::vector<std::string> skus = {"cr-1", "cr-2", "cr-3"};
  uint64_t resume = 0;
  for (const auto& s : skus) resume = Set(s, 0);
  BackgroundWrites writes(this, skus, 3);
  for (int i = 0; i < 300 && !HasFailure(); ++i) {
    auto ctx = Ctx();
    auto reader = stub_->WatchStock(ctx.get(), Watch(skus, resume));
    StreamChecker check(resume);
    inv::StockUpdate u;
    for (int c = 0; c < 8; ++c) {
      ASSERT_TRUE(reader->Read(&u)) << reader->Finish().error_message();
      check.Change(u);
    }
    resume = u.sequence();  // resume from the newest seen, as a client does
    ctx->TryCancel();
    reader->Finish();
  }
}

// --- Feed leases ---------------------------------------------------------------------

inv::FeedRequest LeasedReserves(const std::string& sku, int n, const std::string& prefix) {
  inv::FeedRequest batch;
  for (int i = 0; i < n; ++i) {
    inv::FeedRequest* r = i == 0 ? &batch : batch.add_more();
    r->set_request_id(prefix + std::to_string(i));
    r->mutable_reserve()->set_lease_to_stream(true);
    auto* req = r->mutable_reserve()->mutable_request();
    req->set_ttl_ms(600'000);  // far beyond the test: only the lease can free these
    auto* line = req->add_lines();
    line->set_sku(sku);
    line->set_quantity(1);
  }
  return batch;
}

class LeaseTest : public StreamTest {
 protected:
  // Waits up to 10 s for every hold on `sku` to be released.
  int64_t ReservedAfterLeasesEnd(const std::string& sku) {
    int64_t reserved = Level(sku).reserved();
    for (int i = 0; i < 500 && reserved != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      reserved = Level(sku).reserved();
    }
    return reserved;
  }
};

TEST_F(LeaseTest, HoldsLeasedToAStreamCancelledWhileTheirReservesAreInFlightAreReleased) {
  Adjust("ls-1", 1'000'000);
  for (int i = 0; i < 40 && !HasFailure(); ++i) {
    auto ctx = Ctx();
    auto stream = stub_->Feed(ctx.get());
    ASSERT_TRUE(stream->Write(LeasedReserves("ls-1", 50, "r")));
    std::this_thread::sleep_for(std::chrono::microseconds(250 * (i % 12)));
    ctx->TryCancel();
    stream->Finish();
    EXPECT_EQ(ReservedAfterLeasesEnd("ls-1"), 0) << "cancelled after " << 250 * (i % 12) << " us";
  }
}

TEST_F(LeaseTest, HoldsLeasedToAKilledClientAreReleased) {
  Adjust("lk-1", 1'000'000);
  std::mt19937 rng(7);
  for (int i = 0; i < 12 && !HasFailure(); ++i) {
    std::string self = std::filesystem::read_symlink("/proc/self/exe");
    std::string address = server_->address();
    std::vector<char*> argv = {self.data(), const_cast<char*>("--lease-client"), address.data(),
                               const_cast<char*>("lk-1"), nullptr};
    pid_t child = 0;
    ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    // Kill it at some point of a busy pipeline: once it holds stock, after 0-30 ms more.
    int64_t reserved = 0;
    for (int w = 0; w < 500 && (reserved = Level("lk-1").reserved()) == 0; ++w) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GT(reserved, 0) << "the client never reserved";
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 30));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_EQ(ReservedAfterLeasesEnd("lk-1"), 0) << "kill " << i;
  }
}

// The child: leased reserves of one unit, 100 per message, as fast as results come back,
// for at most 20 s.
int RunLeaseClient(const std::string& address, const std::string& sku) {
  auto stub = inv::InventoryService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub->Feed(&ctx);
  inv::FeedResponse resp;
  for (int m = 0; m < 100'000; ++m) {
    if (!stream->Write(LeasedReserves(sku, 100, "m" + std::to_string(m) + "-"))) break;
    if (m >= 4 && !stream->Read(&resp)) break;  // keep a few messages in flight
  }
  return 0;
}

// --- Requests that cannot be parsed -------------------------------------------------

grpc::ByteBuffer Bytes(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

// lines { sku: "\xc3\x28" quantity: 1 }: a string field that is not UTF-8.
const std::string kBadUtf8Reserve = std::string("\x0a\x06\x0a\x02\xc3\x28\x18\x01", 8);
const std::string kGarbage = std::string("\xff\xff\xff\xff\x0f", 5);

grpc::Status RawUnary(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                      const std::string& bytes) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::ByteBuffer request = Bytes(bytes), response;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) { done.set_value(s); });
  return done.get_future().get();
}

TEST_F(StreamTest, AUnaryRequestThatCannotBeParsedGetsInvalidArgumentSayingWhy) {
  Adjust("pz-1", 5);
  for (const char* method :
       {"/inventory.v1.InventoryService/GetStock", "/inventory.v1.InventoryService/AdjustStock",
        "/inventory.v1.InventoryService/Reserve", "/inventory.v1.InventoryService/Commit",
        "/inventory.v1.InventoryService/Release", "/inventory.v1.InventoryService/GetReservation",
        "/order.v1.OrderService/CreateOrder", "/order.v1.OrderService/GetOrder",
        "/order.v1.OrderService/PayOrder", "/order.v1.OrderService/AdvanceOrder",
        "/order.v1.OrderService/CancelOrder"}) {
    grpc::Status s = RawUnary(channel_, method, kGarbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("could not be parsed")) << method;
  }
  grpc::Status utf8 = RawUnary(channel_, "/inventory.v1.InventoryService/Reserve", kBadUtf8Reserve);
  EXPECT_EQ(utf8.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << utf8.error_message();
  EXPECT_THAT(utf8.error_message(), HasSubstr("inventory.v1.Line.sku"));
  EXPECT_THAT(utf8.error_message(), HasSubstr("UTF-8"));
  EXPECT_EQ(Level("pz-1").reserved(), 0);
}

// A server-streaming call with raw bytes: the status it ends with.
grpc::Status RawServerStream(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& method, const std::string& bytes) {
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto call = generic.PrepareCall(&ctx, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer request = Bytes(bytes);
  call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer response;
  do {
    call->Read(&response, reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
  } while (ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

TEST_F(StreamTest, AStreamRequestThatCannotBeParsedGetsInvalidArgument) {
  for (const char* method :
       {"/inventory.v1.InventoryService/WatchStock", "/order.v1.OrderService/StreamOrderUpdates"}) {
    grpc::Status s = RawServerStream(channel_, method, kGarbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("could not be parsed")) << method;
  }
}

TEST_F(StreamTest, AFeedMessageThatCannotBeParsedEndsTheStreamWithAnErrorAndReleasesLeases) {
  Adjust("pf-1", 10);
  grpc::GenericStub generic(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = generic.PrepareCall(&ctx, "/inventory.v1.InventoryService/Feed", &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&] {
    cq.Next(&tag, &ok);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(step());
  // A leased reserve, answered...
  std::string leased;
  ASSERT_TRUE(LeasedReserves("pf-1", 1, "r").SerializeToString(&leased));
  call->Write(Bytes(leased), reinterpret_cast<void*>(2));
  ASSERT_TRUE(step());
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(step());
  EXPECT_EQ(Level("pf-1").reserved(), 1);
  // ...then bytes that are no FeedRequest: the stream ends with an error.
  call->Write(Bytes(kGarbage), reinterpret_cast<void*>(4));
  step();
  call->Read(&response, reinterpret_cast<void*>(5));
  EXPECT_FALSE(step()) << "the stream went on after an unparseable message";
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(6));
  step();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("could not be parsed"));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  int64_t reserved = 1;
  for (int i = 0; i < 250 && (reserved = Level("pf-1").reserved()) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(reserved, 0) << "the leased hold outlived its stream";
}

}  // namespace
}  // namespace feed

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--lease-client") == 0) {
    return feed::RunLeaseClient(argv[2], argv[3]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

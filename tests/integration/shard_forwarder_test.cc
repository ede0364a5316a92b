// GrpcShardForwarder (app/src/grpc_shard_forwarder.h) against a real gRPC server on loopback
// whose every call stays open until the client cancels it: Shutdown answers each forwarded
// call in flight (CANCELLED) before it returns, so no callback outlives the gateway that
// passed it, and a call forwarded afterwards is answered UNAVAILABLE at once.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "grpc_shard_forwarder.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::server {
namespace {

using namespace std::chrono_literals;

// Holds every call until it is cancelled.
class SilentService final : public grpc::CallbackGenericService {
 public:
  std::atomic<int> calls{0};

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    ++calls;
    return new Hold();
  }

 private:
  class Hold final : public grpc::ServerGenericBidiReactor {
   public:
    void OnCancel() override { Finish(grpc::Status::CANCELLED); }
    void OnDone() override { delete this; }
  };
};

// What one `done` received.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;

  ShardForwarder::Done Callback() {
    return [this](const absl::Status& s, const google::protobuf::Message*) {
      std::this_thread::sleep_for(50ms);  // a callback that takes a while still finishes first
      std::lock_guard lock(mu);
      status = s;
      done = true;
      cv.notify_all();
    };
  }
  bool Done() {
    std::lock_guard lock(mu);
    return done;
  }
};

TEST(ShardForwarderTest, ShutdownAnswersEveryCallInFlightBeforeItReturns) {
  SilentService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);

  auto forwarder = GrpcShardForwarder::Create(ServerConfig());
  ASSERT_TRUE(forwarder.ok()) << forwarder.status();
  inventory::v1::GetStockRequest request;
  request.add_sku("sku-1");
  const inventory::v1::GetStockResponse reply;
  Outcome first, second;
  (*forwarder)
      ->Forward(address, "inventory.v1.InventoryService/GetStock", request, reply, {},
                first.Callback());
  (*forwarder)
      ->Forward(address, "inventory.v1.InventoryService/GetStock", request, reply, {},
                second.Callback());
  for (int i = 0; i < 200 && service.calls < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(service.calls, 2) << "the owner did not get both calls";
  EXPECT_FALSE(first.Done());

  (*forwarder)->Shutdown();
  for (Outcome* o : {&first, &second}) {
    ASSERT_TRUE(o->Done()) << "Shutdown returned before a callback ran";
    EXPECT_EQ(o->status.code(), absl::StatusCode::kCancelled) << o->status;
  }

  Outcome late;
  (*forwarder)
      ->Forward(address, "inventory.v1.InventoryService/GetStock", request, reply, {},
                late.Callback());
  ASSERT_TRUE(late.Done());
  EXPECT_EQ(late.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(late.status.message().find("shutting down"), std::string::npos);
  EXPECT_EQ(service.calls, 2) << "a call forwarded after Shutdown reached the owner";
  forwarder->reset();  // the destructor's Shutdown finds nothing in flight
  server->Shutdown();
}

}  // namespace
}  // namespace feed::server

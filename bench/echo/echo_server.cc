// echo-server: the same unary Echo RPC served through either gRPC C++ server API, so the two
// can be benchmarked against each other on one machine.
//
//   echo-server --listen 127.0.0.1:50061 --api cq --threads 2
//   echo-server --listen 127.0.0.1:50062 --api callback
//
// --api cq        classic async ("completion-queue") server: one ServerCompletionQueue per
//                 thread, each thread polls only its own CQ, --prepost CallData objects are
//                 posted on every CQ up front so that many calls can be accepted at once.
// --api callback  Echo::CallbackService with a unary reactor that finishes inline.
//
// Both register the proto reflection service (ghz/grpcurl work without a .proto file), and
// both shut down cleanly on SIGINT/SIGTERM: Server::Shutdown with a deadline, then (cq mode)
// shut down and drain every completion queue.
//
// Note (gRPC 1.51): libgrpc++_reflection.so registers its ServerBuilder plugin from a static
// initializer, so merely linking it enables reflection; InitProtoReflectionServerBuilderPlugin()
// only makes the dependency explicit (and keeps --as-needed from dropping the library). The
// reflection service is a *sync* service, so every server also gets the sync-server thread
// manager ("grpcpp_sync_ser" threads, 1-2 pollers); they stay idle under Echo load.

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "echo.grpc.pb.h"

namespace {

using bench::echo::v1::Echo;
using bench::echo::v1::EchoReply;
using bench::echo::v1::EchoRequest;

constexpr auto kShutdownGrace = std::chrono::seconds(2);

// ---------------------------------------------------------------- completion-queue API ----

struct CqWorker {
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  // Taken by the polling thread while it handles an event (so it may post new operations) and
  // by the shutdown path when it shuts the CQ down: no operation can be posted after that.
  // Only ever contended once, at shutdown.
  std::mutex mu;
  bool shutting_down = false;
  std::thread thread;
};

class CallData {
 public:
  CallData(Echo::AsyncService* service, CqWorker* worker)
      : service_(service), worker_(worker), responder_(&ctx_) {
    service_->RequestEcho(&ctx_, &request_, &responder_, worker_->cq.get(), worker_->cq.get(),
                          this);
  }

  // Called with worker_->mu held.
  void Proceed(bool ok) {
    if (state_ == State::kRequested) {
      if (!ok || worker_->shutting_down) {  // server shutting down: request never matched
        delete this;
        return;
      }
      new CallData(service_, worker_);  // keep the number of posted requests constant
      reply_.set_value(request_.value());
      reply_.set_sequence(request_.sequence());
      state_ = State::kFinishing;
      responder_.Finish(reply_, grpc::Status::OK, this);
      return;
    }
    delete this;  // kFinishing: the reply has been sent (or the call died); either way done
  }

 private:
  enum class State { kRequested, kFinishing };

  Echo::AsyncService* service_;
  CqWorker* worker_;
  grpc::ServerContext ctx_;
  EchoRequest request_;
  EchoReply reply_;
  grpc::ServerAsyncResponseWriter<EchoReply> responder_;
  State state_ = State::kRequested;
};

void PollLoop(CqWorker* worker) {
  void* tag = nullptr;
  bool ok = false;
  while (worker->cq->Next(&tag, &ok)) {
    std::lock_guard<std::mutex> lock(worker->mu);
    static_cast<CallData*>(tag)->Proceed(ok);
  }
}

// ------------------------------------------------------------------------ callback API ----

class EchoCallbackService final : public Echo::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx, const EchoRequest* request,
                                 EchoReply* reply) override {
    reply->set_value(request->value());
    reply->set_sequence(request->sequence());
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// --------------------------------------------------------------------------------- main ----

int WaitForTerminationSignal(const sigset_t& set) {
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

}  // namespace

int main(int argc, char** argv) {
  // As in feed-server: no deadlock graph walk on every absl::Mutex lock inside gRPC.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"gRPC echo server for comparing the completion-queue and callback APIs"};
  std::string listen = "127.0.0.1:50061";
  std::string api = "cq";
  unsigned hw = std::thread::hardware_concurrency();
  int threads = hw == 0 ? 1 : static_cast<int>(hw);
  int prepost = 64;
  app.add_option("--listen", listen, "address to listen on (host:port)")->capture_default_str();
  app.add_option("--api", api, "server API")
      ->check(CLI::IsMember({"cq", "callback"}))
      ->capture_default_str();
  app.add_option("--threads", threads, "completion-queue threads (cq mode only)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--prepost", prepost, "requests pre-posted per completion queue (cq mode)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Block the termination signals before gRPC starts any thread, so that every thread inherits
  // the mask and the signals are only ever consumed by sigwait() below.
  sigset_t term_signals;
  sigemptyset(&term_signals);
  sigaddset(&term_signals, SIGINT);
  sigaddset(&term_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term_signals, nullptr);

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port);

  Echo::AsyncService async_service;
  EchoCallbackService callback_service;
  std::vector<std::unique_ptr<CqWorker>> workers;

  if (api == "cq") {
    builder.RegisterService(&async_service);
    for (int i = 0; i < threads; ++i) {
      auto w = std::make_unique<CqWorker>();
      w->cq = builder.AddCompletionQueue();
      workers.push_back(std::move(w));
    }
  } else {
    builder.RegisterService(&callback_service);
  }

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    std::fprintf(stderr, "echo-server: failed to listen on %s\n", listen.c_str());
    return 1;
  }

  if (api == "cq") {
    for (auto& w : workers) {
      for (int i = 0; i < prepost; ++i) new CallData(&async_service, w.get());
      w->thread = std::thread(PollLoop, w.get());
    }
    std::fprintf(stderr, "echo-server: api=cq threads=%d prepost=%d on %s\n", threads, prepost,
                 listen.c_str());
  } else {
    std::fprintf(stderr, "echo-server: api=callback on %s\n", listen.c_str());
  }

  int sig = WaitForTerminationSignal(term_signals);
  std::fprintf(stderr, "echo-server: signal %d, shutting down\n", sig);

  server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  for (auto& w : workers) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->shutting_down = true;
    w->cq->Shutdown();
  }
  for (auto& w : workers) w->thread.join();  // PollLoop drains its CQ until Next() is false
  server.reset();
  workers.clear();
  std::fprintf(stderr, "echo-server: stopped\n");
  return 0;
}

// The client side of the crash loop (crash_loop.sh): runs the deterministic plan of
// tests/crash/crash_plan.h against a real feed-server over gRPC while the server is killed
// and restarted under it. Every step carries its idempotency key; an ambiguous outcome
// (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN, INTERNAL) is retried with the same key
// until it succeeds, so the plan ends applied exactly once.
//
//   chaos-client run ADDRESS SEED UNITS THREADS     prints "chaos-client: steps=N retries=M"
//   chaos-client verify ADDRESS SEED UNITS          compares GetStock with the model; prints
//                                                   "expected_events=N"; exit 1 on a mismatch
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "crash/crash_plan.h"
#include "grpcpp/grpcpp.h"
#include "inventory/v1/inventory.grpc.pb.h"

namespace {

using namespace feed::crash;  // NOLINT: a test tool
namespace inv = inventory::v1;

std::atomic<uint64_t> g_steps{0}, g_retries{0};

bool Ambiguous(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::UNKNOWN ||
         code == grpc::StatusCode::INTERNAL;
}

// Calls until OK; exits the process on a definite error (the plan never expects one).
template <class Req, class Resp, class Fn>
void Retry(const std::string& key, const Req& request, Fn call) {
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    Resp response;
    grpc::Status s = call(&ctx, request, &response);
    if (s.ok()) {
      ++g_steps;
      return;
    }
    if (!Ambiguous(s.error_code()) || attempt > 2000) {
      std::fprintf(stderr, "chaos-client: step %s failed for good: %d %s\n", key.c_str(),
                   s.error_code(), s.error_message().c_str());
      std::exit(3);
    }
    ++g_retries;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inv::ReserveRequest ReserveOf(const Unit& u) {
  inv::ReserveRequest r;
  for (const auto& l : u.lines) {
    auto* line = r.add_lines();
    line->set_sku(SkuName(l.sku));
    line->set_quantity(l.quantity);
  }
  r.set_reservation_id(u.reservation_id());
  r.set_ttl_ms(7LL * 24 * 3600 * 1000);
  r.set_idempotency_key(u.reserve_key());
  return r;
}

int Run(const std::string& address, uint64_t seed, uint64_t units, int threads) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = inv::InventoryService::NewStub(channel);
  auto adjust = [&](grpc::ClientContext* c, const inv::AdjustStockRequest& r,
                    inv::AdjustStockResponse* o) { return stub->AdjustStock(c, r, o); };
  for (int s = 0; s < kSkus; ++s) {
    inv::AdjustStockRequest r;
    r.set_sku(SkuName(s));
    r.set_mode(inv::ADJUST_MODE_DELTA);
    r.set_quantity(kInitialOnHand);
    r.set_idempotency_key(InitKey(s));
    Retry<inv::AdjustStockRequest, inv::AdjustStockResponse>(InitKey(s), r, adjust);
  }
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (uint64_t i = next++; i < units; i = next++) {
        Unit u = MakeUnit(seed, i);
        if (u.kind == Kind::kAdjust) {
          inv::AdjustStockRequest r;
          r.set_sku(SkuName(u.lines[0].sku));
          r.set_mode(inv::ADJUST_MODE_DELTA);
          r.set_quantity(u.lines[0].quantity);
          r.set_idempotency_key(u.adjust_key());
          Retry<inv::AdjustStockRequest, inv::AdjustStockResponse>(u.adjust_key(), r, adjust);
          continue;
        }
        Retry<inv::ReserveRequest, inv::ReserveResponse>(
            u.reserve_key(), ReserveOf(u),
            [&](grpc::ClientContext* c, const inv::ReserveRequest& r, inv::ReserveResponse* o) {
              return stub->Reserve(c, r, o);
            });
        if (u.then == Then::kCommit) {
          inv::CommitRequest r;
          r.set_reservation_id(u.reservation_id());
          r.set_idempotency_key(u.commit_key());
          Retry<inv::CommitRequest, inv::CommitResponse>(
              u.commit_key(), r,
              [&](grpc::ClientContext* c, const inv::CommitRequest& q, inv::CommitResponse* o) {
                return stub->Commit(c, q, o);
              });
        } else if (u.then == Then::kRelease) {
          inv::ReleaseRequest r;
          r.set_reservation_id(u.reservation_id());
          r.set_idempotency_key(u.release_key());
          Retry<inv::ReleaseRequest, inv::ReleaseResponse>(
              u.release_key(), r,
              [&](grpc::ClientContext* c, const inv::ReleaseRequest& q, inv::ReleaseResponse* o) {
                return stub->Release(c, q, o);
              });
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  std::printf("chaos-client: steps=%llu retries=%llu\n",
              static_cast<unsigned long long>(g_steps.load()),
              static_cast<unsigned long long>(g_retries.load()));
  return 0;
}

int Verify(const std::string& address, uint64_t seed, uint64_t units) {
  auto stub = inv::InventoryService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  Expected e = Model(seed, units);
  inv::GetStockRequest req;
  for (int s = 0; s < kSkus; ++s) req.add_keys()->set_sku(SkuName(s));
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  inv::GetStockResponse resp;
  grpc::Status s = stub->GetStock(&ctx, req, &resp);
  if (!s.ok()) {
    std::fprintf(stderr, "chaos-client: GetStock: %s\n", s.error_message().c_str());
    return 2;
  }
  int bad = 0;
  for (const auto& level : resp.levels()) {
    int sku = std::stoi(level.sku().substr(4));
    if (level.on_hand() != e.on_hand[sku] || level.reserved() != e.reserved[sku] ||
        level.available() < 0) {
      std::fprintf(stderr, "chaos-client: %s on_hand %lld reserved %lld, model %lld / %lld\n",
                   level.sku().c_str(), static_cast<long long>(level.on_hand()),
                   static_cast<long long>(level.reserved()), static_cast<long long>(e.on_hand[sku]),
                   static_cast<long long>(e.reserved[sku]));
      ++bad;
    }
  }
  if (resp.levels_size() != kSkus) ++bad;
  std::printf("expected_events=%llu levels_checked=%d mismatches=%d\n",
              static_cast<unsigned long long>(e.events), resp.levels_size(), bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 6 && std::string(argv[1]) == "run") {
    return Run(argv[2], std::stoull(argv[3]), std::stoull(argv[4]), std::stoi(argv[5]));
  }
  if (argc >= 5 && std::string(argv[1]) == "verify") {
    return Verify(argv[2], std::stoull(argv[3]), std::stoull(argv[4]));
  }
  std::fprintf(stderr,
               "usage: chaos-client run ADDRESS SEED UNITS THREADS | verify ADDRESS SEED UNITS\n");
  return 2;
}

#include "seed.h"

namespace feed::loadgen {

SeedResult Seed(Shared& sh) {
  const Options& o = sh.opt;
  SeedResult r;
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    inventory::v1::AdjustStockResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inventory::v1::AdjustStockResponse>> rpc;
  };
  auto start = Clock::now();
  int next = 0, inflight = 0;
  auto launch = [&](int i) {
    auto* c = new Call;
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!o.token.empty()) c->ctx.AddMetadata("authorization", "Bearer " + o.token);
    inventory::v1::AdjustStockRequest req;
    req.set_sku(sh.skus[static_cast<size_t>(i)]);
    req.set_mode(inventory::v1::ADJUST_MODE_SET);
    req.set_quantity(i < o.hot_skus ? o.hot_stock : o.stock);
    req.set_reason("loadgen seed");
    c->rpc = sh.inventory[static_cast<size_t>(i) % sh.inventory.size()]->PrepareAsyncAdjustStock(
        &c->ctx, req, &cq);
    c->rpc->StartCall();
    c->rpc->Finish(&c->resp, &c->status, c);
    ++inflight;
  };
  while (next < o.skus && inflight < o.seed_concurrency) launch(next++);
  void* tag = nullptr;
  bool ok = false;
  while (inflight > 0 && cq.Next(&tag, &ok)) {
    auto* c = static_cast<Call*>(tag);
    --inflight;
    ++r.codes[ClampCode(static_cast<int>(c->status.error_code()))];
    if (c->status.ok()) {
      ++r.ok;
      sh.seed_sequence = std::max<uint64_t>(sh.seed_sequence, c->resp.sequence());
    }
    delete c;
    if (next < o.skus) launch(next++);
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

}  // namespace feed::loadgen

// feedctl reservation create|commit|release|get.
#include <grpcpp/grpcpp.h>

#include <charconv>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"

namespace feedctl {

bool ParseLine(const std::string& text, std::string* sku, int64_t* quantity,
               std::string* location) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string rest = text.substr(colon + 1);
  *sku = text.substr(0, colon);
  location->clear();
  if (size_t at = rest.find('@'); at != std::string::npos) {
    *location = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (location->empty()) return false;
  }
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), *quantity);
  return !rest.empty() && ec == std::errc() && ptr == rest.data() + rest.size();
}

namespace {

struct ReserveArgs {
  std::vector<std::string> lines;
  std::string id, order_id, key;
  int64_t ttl_ms = 0;
};

int Reserve(Context& ctx, const ReserveArgs& a) {
  inventory::v1::ReserveRequest req;
  for (const auto& text : a.lines) {
    auto* line = req.add_lines();
    std::string sku, location;
    int64_t quantity = 0;
    if (!ParseLine(text, &sku, &quantity, &location)) {
      std::fprintf(stderr,
                   "feedctl: reservation create: line '%s' is not SKU:QUANTITY[@LOCATION]\n",
                   text.c_str());
      return kUsage;
    }
    line->set_sku(sku);
    line->set_quantity(quantity);
    line->set_location(location);
  }
  req.set_ttl_ms(a.ttl_ms);
  req.set_reservation_id(a.id);
  req.set_order_id(a.order_id);
  req.set_idempotency_key(a.key);
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  inventory::v1::ReserveResponse resp;
  grpc::Status s = c->Unary(&inventory::v1::InventoryService::Stub::Reserve, req, &resp);
  if (!s.ok()) return ctx.output().Error("Reserve", s);
  ctx.output().Print(resp, Describe(resp.reservation()) + (resp.replayed() ? " (replayed)" : ""));
  return kOk;
}

template <class Req, class Resp>
int Close(Context& ctx, const char* what,
          grpc::Status (inventory::v1::InventoryService::Stub::*call)(grpc::ClientContext*,
                                                                      const Req&, Resp*),
          const Req& req) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  Resp resp;
  grpc::Status s = c->Unary(call, req, &resp);
  if (!s.ok()) return ctx.output().Error(what, s);
  ctx.output().Print(resp, Describe(resp.reservation()) + (resp.replayed() ? " (replayed)" : ""));
  return kOk;
}

int Get(Context& ctx, const std::string& id) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  inventory::v1::GetReservationRequest req;
  req.set_reservation_id(id);
  inventory::v1::Reservation resp;
  grpc::Status s = c->Unary(&inventory::v1::InventoryService::Stub::GetReservation, req, &resp);
  if (!s.ok()) return ctx.output().Error("GetReservation", s);
  ctx.output().Print(resp, Describe(resp));
  return kOk;
}

}  // namespace

void AddReservationCommands(CLI::App& app, Context& ctx) {
  CLI::App* r = app.add_subcommand("reservation", "hold stock: create, commit, release, get");
  r->require_subcommand(1);

  auto* create = r->add_subcommand("create", "hold stock: all lines or none");
  auto a = std::make_shared<ReserveArgs>();
  create->add_option("line", a->lines, "SKU:QUANTITY[@LOCATION], one or more")->required();
  create->add_option("--ttl-ms", a->ttl_ms, "how long the hold lasts (default: the server's)");
  create->add_option("--id", a->id, "reservation id (default: the server makes one)");
  create->add_option("--order", a->order_id, "order id to record");
  create->add_option("--key", a->key, "idempotency key (a retry with it holds nothing twice)");
  create->callback([&ctx, a] { ctx.run = [&ctx, a] { return Reserve(ctx, *a); }; });

  auto* commit = r->add_subcommand("commit", "deduct a hold from on-hand");
  auto cid = std::make_shared<std::string>(), ckey = std::make_shared<std::string>();
  commit->add_option("id", *cid, "reservation id")->required();
  commit->add_option("--key", *ckey, "idempotency key");
  commit->callback([&ctx, cid, ckey] {
    ctx.run = [&ctx, cid, ckey] {
      inventory::v1::CommitRequest req;
      req.set_reservation_id(*cid);
      req.set_idempotency_key(*ckey);
      return Close(ctx, "Commit", &inventory::v1::InventoryService::Stub::Commit, req);
    };
  });

  auto* release = r->add_subcommand("release", "give a hold's stock back");
  auto rid = std::make_shared<std::string>(), rkey = std::make_shared<std::string>(),
       reason = std::make_shared<std::string>();
  release->add_option("id", *rid, "reservation id")->required();
  release->add_option("--reason", *reason, "why (recorded in the event)");
  release->add_option("--key", *rkey, "idempotency key");
  release->callback([&ctx, rid, rkey, reason] {
    ctx.run = [&ctx, rid, rkey, reason] {
      inventory::v1::ReleaseRequest req;
      req.set_reservation_id(*rid);
      req.set_reason(*reason);
      req.set_idempotency_key(*rkey);
      return Close(ctx, "Release", &inventory::v1::InventoryService::Stub::Release, req);
    };
  });

  auto* get = r->add_subcommand("get", "a reservation and its state");
  auto gid = std::make_shared<std::string>();
  get->add_option("id", *gid, "reservation id")->required();
  get->callback([&ctx, gid] { ctx.run = [&ctx, gid] { return Get(ctx, *gid); }; });
}

}  // namespace feedctl

// feedctl order create|get|pay|advance|cancel|follow.
#include <grpcpp/grpcpp.h>

#include <csignal>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"
#include "google/protobuf/util/time_util.h"
#include "interrupt.h"

namespace feedctl {
namespace {

using order::v1::OrderResponse;

struct CreateArgs {
  std::string customer, key;
  std::vector<std::string> items, lines;
  double total = 0;
  int64_t hold_ttl_ms = 0;
};

int Create(Context& ctx, const CreateArgs& a) {
  order::v1::CreateOrderRequest req;
  req.set_customer_id(a.customer);
  for (const auto& i : a.items) req.add_item_ids(i);
  for (const auto& text : a.lines) {
    std::string sku, location;
    int64_t quantity = 0;
    if (!ParseLine(text, &sku, &quantity, &location)) {
      std::fprintf(stderr, "feedctl: order create: --line '%s' is not SKU:QUANTITY[@LOCATION]\n",
                   text.c_str());
      return kUsage;
    }
    auto* line = req.add_lines();
    line->set_sku(sku);
    line->set_quantity(quantity);
    line->set_location(location);
  }
  req.set_total_amount(a.total);
  req.set_idempotency_key(a.key);
  req.set_hold_ttl_ms(a.hold_ttl_ms);
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  order::v1::CreateOrderResponse resp;
  grpc::Status s = c->Unary(&order::v1::OrderService::Stub::CreateOrder, req, &resp);
  if (!s.ok()) return ctx.output().Error("CreateOrder", s);
  ctx.output().Print(
      resp,
      fmt::format(
          "{} {}: stock held by {} until {}{}", resp.order_id(), resp.status(),
          resp.reservation_id(),
          google::protobuf::util::TimeUtil::ToString(
              google::protobuf::util::TimeUtil::MillisecondsToTimestamp(resp.hold_expires_at_ms())),
          resp.replayed() ? " (replayed)" : ""));
  return kOk;
}

template <class Req>
int Transition(Context& ctx, const char* what,
               grpc::Status (order::v1::OrderService::Stub::*call)(grpc::ClientContext*, const Req&,
                                                                   OrderResponse*),
               const Req& req) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  OrderResponse resp;
  grpc::Status s = c->Unary(call, req, &resp);
  if (!s.ok()) return ctx.output().Error(what, s);
  ctx.output().Print(resp, Describe(resp.order()) + (resp.replayed() ? " (replayed)" : ""));
  return kOk;
}

int Get(Context& ctx, const std::string& id) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  order::v1::GetOrderRequest req;
  req.set_order_id(id);
  order::v1::Order resp;
  grpc::Status s = c->Unary(&order::v1::OrderService::Stub::GetOrder, req, &resp);
  if (!s.ok()) return ctx.output().Error("GetOrder", s);
  ctx.output().Print(resp, Describe(resp));
  return kOk;
}

// The order's status now, then every change until a terminal one (the stream ends there).
int Follow(Context& ctx, const std::string& id) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  order::v1::OrderSubscriptionRequest req;
  req.set_order_id(id);
  CancelOnInterrupt interrupt;
  grpc::Status s;
  // In cluster mode a node that does not own the order's shard names the owner: follow it.
  // After a move mid-stream the new owner starts again with the order's status now.
  Endpoint* to = &c->primary();
  for (int hop = 0;; ++hop) {
    auto context = c->NewContext(/*streaming=*/true);
    interrupt.Watch(context.get());
    auto stream = to->orders->StreamOrderUpdates(context.get(), req);
    order::v1::OrderStatusUpdate update;
    while (stream->Read(&update)) {
      ctx.output().Print(update, fmt::format("{} {}: {} (sequence {})", update.order_id(),
                                             update.status(), update.details(), update.sequence()));
    }
    s = stream->Finish();
    interrupt.Unwatch(context.get());
    const std::string owner = ShardOwnerNamedBy(s, *context);
    if (owner.empty() || owner == to->address || hop == kMaxOwnerHops) break;
    to = &c->At(owner);
  }
  if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) {
    return ctx.output().Error("StreamOrderUpdates", s);
  }
  return kOk;
}

}  // namespace

void AddOrderCommands(CLI::App& app, Context& ctx) {
  CLI::App* o = app.add_subcommand("order", "orders: create, get, pay, advance, cancel, follow");
  o->require_subcommand(1);

  auto* create = o->add_subcommand("create", "create an order: its stock is held at once");
  auto a = std::make_shared<CreateArgs>();
  create->add_option("--customer", a->customer, "customer id")->required();
  create->add_option("--item", a->items, "an item id (one unit of that SKU), repeatable");
  create->add_option("--line", a->lines, "SKU:QUANTITY[@LOCATION], repeatable");
  create->add_option("--total", a->total, "total amount");
  create->add_option("--hold-ttl-ms", a->hold_ttl_ms, "how long the stock is held before payment");
  create->add_option("--key", a->key, "idempotency key");
  create->callback([&ctx, a] { ctx.run = [&ctx, a] { return Create(ctx, *a); }; });

  auto* get = o->add_subcommand("get", "an order");
  auto gid = std::make_shared<std::string>();
  get->add_option("id", *gid, "order id")->required();
  get->callback([&ctx, gid] { ctx.run = [&ctx, gid] { return Get(ctx, *gid); }; });

  auto* pay = o->add_subcommand("pay", "the order was paid: its hold is committed");
  auto pid = std::make_shared<std::string>(), pref = std::make_shared<std::string>(),
       pkey = std::make_shared<std::string>();
  pay->add_option("id", *pid, "order id")->required();
  pay->add_option("--reference", *pref, "payment reference");
  pay->add_option("--key", *pkey, "idempotency key");
  pay->callback([&ctx, pid, pref, pkey] {
    ctx.run = [&ctx, pid, pref, pkey] {
      order::v1::PayOrderRequest req;
      req.set_order_id(*pid);
      req.set_payment_reference(*pref);
      req.set_idempotency_key(*pkey);
      return Transition(ctx, "PayOrder", &order::v1::OrderService::Stub::PayOrder, req);
    };
  });

  auto* advance =
      o->add_subcommand("advance", "move a paid order on: PACKING, DISPATCHED, DELIVERED");
  auto aid = std::make_shared<std::string>(), target = std::make_shared<std::string>(),
       details = std::make_shared<std::string>(), akey = std::make_shared<std::string>();
  advance->add_option("id", *aid, "order id")->required();
  advance->add_option("status", *target, "the next status")
      ->required()
      ->check(CLI::IsMember({"PACKING", "DISPATCHED", "DELIVERED"}, CLI::ignore_case));
  advance->add_option("--details", *details, "details for the status update");
  advance->add_option("--key", *akey, "idempotency key");
  advance->callback([&ctx, aid, target, details, akey] {
    ctx.run = [&ctx, aid, target, details, akey] {
      order::v1::AdvanceOrderRequest req;
      req.set_order_id(*aid);
      order::v1::OrderStatus status = order::v1::ORDER_STATUS_UNSPECIFIED;
      std::string name = "ORDER_STATUS_" + *target;
      for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      order::v1::OrderStatus_Parse(name, &status);
      req.set_target(status);
      req.set_details(*details);
      req.set_idempotency_key(*akey);
      return Transition(ctx, "AdvanceOrder", &order::v1::OrderService::Stub::AdvanceOrder, req);
    };
  });

  auto* cancel = o->add_subcommand("cancel", "cancel an order: its stock comes back");
  auto cid = std::make_shared<std::string>(), reason = std::make_shared<std::string>(),
       ckey = std::make_shared<std::string>();
  cancel->add_option("id", *cid, "order id")->required();
  cancel->add_option("--reason", *reason, "why");
  cancel->add_option("--key", *ckey, "idempotency key");
  cancel->callback([&ctx, cid, reason, ckey] {
    ctx.run = [&ctx, cid, reason, ckey] {
      order::v1::CancelOrderRequest req;
      req.set_order_id(*cid);
      req.set_reason(*reason);
      req.set_idempotency_key(*ckey);
      return Transition(ctx, "CancelOrder", &order::v1::OrderService::Stub::CancelOrder, req);
    };
  });

  auto* follow = o->add_subcommand("follow", "the order's status, then every change until it ends");
  auto fid = std::make_shared<std::string>();
  follow->add_option("id", *fid, "order id")->required();
  follow->callback([&ctx, fid] { ctx.run = [&ctx, fid] { return Follow(ctx, *fid); }; });
}

}  // namespace feedctl

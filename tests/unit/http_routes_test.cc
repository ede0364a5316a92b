// The gateway's routing and transcoding without a network: path templates, the route table
// read from the protos, request messages from path, query and body, error mapping.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "path_template.h"
#include "route_table.h"
#include "transcoding.h"

namespace feed::http {
namespace {

using ::testing::HasSubstr;

TEST(PathTemplateTest, MatchesLiteralsVariablesAndVerbs) {
  auto t = PathTemplate::Parse("/v1/reservations/{reservation_id}:commit");
  ASSERT_TRUE(t.ok()) << t.status();
  auto m = t->Match("/v1/reservations/rsv-1:commit");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->size(), 1u);
  EXPECT_EQ((*m)[0].first, "reservation_id");
  EXPECT_EQ((*m)[0].second, "rsv-1");
  EXPECT_FALSE(t->Match("/v1/reservations/rsv-1:release"));
  EXPECT_FALSE(t->Match("/v1/reservations/rsv-1"));
  EXPECT_FALSE(t->Match("/v1/reservations//:commit")) << "an empty variable matches nothing";
  auto escaped = t->Match("/v1/reservations/a%2Fb:commit");
  ASSERT_TRUE(escaped);
  EXPECT_EQ((*escaped)[0].second, "a/b");
  EXPECT_FALSE(t->Match("/v1/reservations/a%2:commit")) << "malformed escape";
  EXPECT_FALSE(PathTemplate::Parse("/v1/{name=**}").ok());
  EXPECT_FALSE(PathTemplate::Parse("v1/x").ok());
}

TEST(RouteTableTest, EveryAnnotatedRpcButFeedHasARoute) {
  auto table = RouteTable::FromServices(kServedServices);
  ASSERT_TRUE(table.ok()) << table.status();
  std::set<std::string> methods;
  for (const auto& r : table->routes()) methods.insert(r.grpc_method);
  EXPECT_EQ(methods.size(), 15u);
  EXPECT_TRUE(methods.count("inventory.v1.InventoryService/GetShardMap"));
  EXPECT_FALSE(methods.count("inventory.v1.InventoryService/Feed"));
  std::vector<std::pair<std::string, std::string>> vars;
  std::vector<std::string> allowed;
  const Route* reserve = table->Find("POST", "/v1/reservations", &vars, &allowed);
  ASSERT_NE(reserve, nullptr);
  EXPECT_EQ(reserve->created_field, "reservation_id");
  EXPECT_EQ(reserve->created_prefix, "/v1/reservations");
  const Route* create = table->Find("POST", "/v1/orders", &vars, &allowed);
  ASSERT_NE(create, nullptr);
  EXPECT_EQ(create->created_field, "order_id");
  const Route* adjust = table->Find("POST", "/v1/stock:adjust", &vars, &allowed);
  ASSERT_NE(adjust, nullptr);
  EXPECT_TRUE(adjust->created_field.empty());
  const Route* watch = table->Find("GET", "/v1/stock:watch", &vars, &allowed);
  ASSERT_NE(watch, nullptr);
  EXPECT_TRUE(watch->server_streaming);
  allowed.clear();
  EXPECT_EQ(table->Find("PUT", "/v1/orders", &vars, &allowed), nullptr);
  EXPECT_THAT(allowed, ::testing::ElementsAre("POST"));
}

class TranscodingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = RouteTable::FromServices(kServedServices);
    ASSERT_TRUE(t.ok());
    table_ = std::move(*t);
  }
  absl::Status Build(const std::string& verb, const std::string& target, const std::string& body,
                     google::protobuf::Message* out, bool ignore_unknown = false) {
    auto q = target.find('?');
    std::vector<std::pair<std::string, std::string>> vars;
    std::vector<std::string> allowed;
    const Route* route = table_.Find(verb, target.substr(0, q), &vars, &allowed);
    if (route == nullptr) return absl::NotFoundError("no route");
    return BuildRequest(*route, vars, q == std::string::npos ? "" : target.substr(q + 1), body,
                        {ignore_unknown}, out);
  }
  RouteTable table_;
};

TEST_F(TranscodingTest, QueryParametersFillScalarAndRepeatedFields) {
  inventory::v1::WatchStockRequest watch;
  ASSERT_TRUE(Build("GET",
                    "/v1/stock:watch?sku=a&sku=b+c&location=w%201&resume_after_sequence=17"
                    "&snapshotOnGap=true",
                    "", &watch)
                  .ok());
  ASSERT_EQ(watch.sku_size(), 2);
  EXPECT_EQ(watch.sku(1), "b c");
  EXPECT_EQ(watch.location(), "w 1");
  EXPECT_EQ(watch.resume_after_sequence(), 17u);
  EXPECT_TRUE(watch.snapshot_on_gap());
}

TEST_F(TranscodingTest, BodyAndPathVariablesMakeTheRequest) {
  order::v1::AdvanceOrderRequest advance;
  ASSERT_TRUE(
      Build("POST", "/v1/orders/ord-7:advance", R"({"target":"ORDER_STATUS_PACKING"})", &advance)
          .ok());
  EXPECT_EQ(advance.order_id(), "ord-7");
  EXPECT_EQ(advance.target(), order::v1::ORDER_STATUS_PACKING);
}

TEST_F(TranscodingTest, ErrorsSayWhereAndWhat) {
  inventory::v1::GetStockRequest get;
  inventory::v1::WatchStockRequest watch;
  auto bad_int = Build("GET", "/v1/stock:watch?resume_after_sequence=-1", "", &watch);
  EXPECT_THAT(std::string(bad_int.message()), HasSubstr("query parameter 'resume_after_sequence'"));
  auto unknown = Build("GET", "/v1/stock?colour=red", "", &get);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("colour"));
  get.Clear();
  EXPECT_TRUE(Build("GET", "/v1/stock?colour=red&sku=a", "", &get, true).ok());
  EXPECT_EQ(get.sku_size(), 1);
  inventory::v1::ReserveRequest reserve;
  auto body =
      Build("POST", "/v1/reservations", R"({"lines":[{"sku":"a","quantity":"x"}]})", &reserve);
  EXPECT_THAT(std::string(body.message()), HasSubstr("request body"));
  auto query_with_body = Build("POST", "/v1/reservations?ttl_ms=5", "{}", &reserve);
  EXPECT_THAT(std::string(query_with_body.message()), HasSubstr("the JSON body carries"));
  order::v1::GetOrderRequest order;
  auto not_utf8 = Build("GET", "/v1/orders/ord%AD1", "", &order);
  EXPECT_THAT(std::string(not_utf8.message()),
              HasSubstr("path variable 'order_id': not valid UTF-8"));
  EXPECT_TRUE(Build("GET", "/v1/orders/%C3%A9t%C3%A9", "", &order).ok());
  EXPECT_EQ(order.order_id(), "\xC3\xA9t\xC3\xA9");
  auto get_with_body = Build("GET", "/v1/stock", R"({"sku":["a"]})", &get);
  EXPECT_THAT(std::string(get_with_body.message()), HasSubstr("takes no body"));
}

TEST(StatusMappingTest, AsGrpcGatewayMapsThem) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kOutOfRange), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(StatusJson(absl::NotFoundError("no \"x\"")),
            R"({"code":5,"details":[],"message":"no \"x\""})");
}

}  // namespace
}  // namespace feed::http

// Unit tests of the core: Validation: INVALID_ARGUMENT naming the field; nothing reaches the
// writer. Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// Validation: INVALID_ARGUMENT naming the field; nothing reaches the writer.

TEST_F(CoreTest, ReserveValidationNamesTheField) {
  ASSERT_OK(Adjust("sku-a", 10));
  size_t commits = store_.commits();
  struct Case {
    const char* name;
    inv::ReserveRequest request;
    const char* field;
  };
  std::vector<Case> cases;
  cases.push_back({"no lines", ReserveReq({}), "lines: at least one line"});
  cases.push_back({"empty sku", ReserveReq({{"", 1}}), "lines[0].sku: is required"});
  cases.push_back({"zero quantity", ReserveReq({{"sku-a", 1}, {"sku-a", 0}}),
                   "lines[1].quantity: must be between 1 and 1000000, got 0"});
  cases.push_back({"negative quantity", ReserveReq({{"sku-a", -1}}), "lines[0].quantity"});
  cases.push_back({"huge quantity", ReserveReq({{"sku-a", 1'000'001}}), "lines[0].quantity"});
  std::vector<L> many(101, L{"sku-a", 1});
  cases.push_back({"too many lines", ReserveReq(many), "lines: at most 100 lines"});
  cases.push_back({"ttl too short", ReserveReq({{"sku-a", 1}}, "", "", 999), "ttl_ms"});
  cases.push_back(
      {"ttl too long", ReserveReq({{"sku-a", 1}}, "", "", 7LL * 24 * 3600 * 1000 + 1), "ttl_ms"});
  cases.push_back({"negative ttl", ReserveReq({{"sku-a", 1}}, "", "", -5), "ttl_ms"});
  cases.push_back({"space in sku", ReserveReq({{"bad sku", 1}}), "lines[0].sku: may contain only"});
  cases.push_back({"control char in sku", ReserveReq({{"bad\x01", 1}}), "lines[0].sku"});
  cases.push_back({"non-ascii sku", ReserveReq({{"sk\xc3\xa9", 1}}), "lines[0].sku"});
  cases.push_back({"bad location", ReserveReq({{"sku-a", 1, "wh 1"}}), "lines[0].location"});
  cases.push_back({"long reservation id", ReserveReq({{"sku-a", 1}}, std::string(129, 'r')),
                   "reservation_id: at most 128 characters, got 129"});
  cases.push_back(
      {"long sku", ReserveReq({{std::string(129, 's'), 1}}), "lines[0].sku: at most 128"});
  cases.push_back(
      {"bad key", ReserveReq({{"sku-a", 1}}, "", "key with spaces"), "idempotency_key"});
  {
    auto r = ReserveReq({{"sku-a", 1}});
    r.set_order_id("o!");
    cases.push_back({"bad order id", r, "order_id"});
  }
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(IsError(Reserve(c.request), absl::StatusCode::kInvalidArgument, c.field));
  }
  // A 128-character id is fine.
  ASSERT_OK(Reserve({{"sku-a", 1}}, std::string(128, 'r')));
  EXPECT_EQ(store_.commits(), commits + 1);
}

TEST_F(CoreTest, AdjustValidationNamesTheField) {
  auto req = [](std::string sku, inv::AdjustMode mode, int64_t q) {
    inv::AdjustStockRequest r;
    r.set_sku(std::move(sku));
    r.set_mode(mode);
    r.set_quantity(q);
    return r;
  };
  EXPECT_TRUE(IsError(Adjust(req("", inv::ADJUST_MODE_DELTA, 1)),
                      absl::StatusCode::kInvalidArgument, "sku: is required"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_UNSPECIFIED, 1)),
                      absl::StatusCode::kInvalidArgument, "mode"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_DELTA, 0)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_DELTA, 1'000'001)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_DELTA, -1'000'001)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  EXPECT_TRUE(IsError(Adjust(req("sku-a", inv::ADJUST_MODE_SET, 1'000'001)),
                      absl::StatusCode::kInvalidArgument, "quantity"));
  auto loc = req("sku-a", inv::ADJUST_MODE_DELTA, 1);
  loc.set_location("a\tb");
  EXPECT_TRUE(IsError(Adjust(loc), absl::StatusCode::kInvalidArgument, "location"));
  auto reason = req("sku-a", inv::ADJUST_MODE_DELTA, 1);
  reason.set_reason(std::string(513, 'x'));
  EXPECT_TRUE(IsError(Adjust(reason), absl::StatusCode::kInvalidArgument, "reason: at most 512"));
  reason.set_reason("line\nbreak");
  EXPECT_TRUE(IsError(Adjust(reason), absl::StatusCode::kInvalidArgument, "reason"));
  auto key = req("sku-a", inv::ADJUST_MODE_DELTA, 1);
  key.set_idempotency_key(std::string(129, 'k'));
  EXPECT_TRUE(IsError(Adjust(key), absl::StatusCode::kInvalidArgument, "idempotency_key"));
  EXPECT_EQ(EventCount(), 0u);
  EXPECT_EQ(store_.commits(), 1u);  // only the store id written at open
}

TEST_F(CoreTest, CommitReleaseAndReadValidation) {
  EXPECT_TRUE(IsError(Commit(""), absl::StatusCode::kInvalidArgument, "reservation_id"));
  EXPECT_TRUE(IsError(Release("a b"), absl::StatusCode::kInvalidArgument, "reservation_id"));
  EXPECT_TRUE(
      IsError(Release("r-1", std::string(600, 'x')), absl::StatusCode::kInvalidArgument, "reason"));
  EXPECT_TRUE(
      IsError(Commit("r-1", "bad key"), absl::StatusCode::kInvalidArgument, "idempotency_key"));
  EXPECT_TRUE(
      IsError(core_->GetReservation(""), absl::StatusCode::kInvalidArgument, "reservation_id"));
  EXPECT_TRUE(IsError(core_->GetOrder("bad id"), absl::StatusCode::kInvalidArgument, "order_id"));

  inv::GetStockRequest none;
  EXPECT_TRUE(IsError(core_->GetStock(none), absl::StatusCode::kInvalidArgument, "keys"));
  inv::GetStockRequest empty_sku;
  empty_sku.add_keys()->set_sku("sku-a");
  empty_sku.add_keys()->set_location("default");
  EXPECT_TRUE(
      IsError(core_->GetStock(empty_sku), absl::StatusCode::kInvalidArgument, "keys[1].sku"));
  inv::GetStockRequest too_many;
  for (int i = 0; i < 1001; ++i) too_many.add_keys()->set_sku(fmt::format("s{}", i));
  EXPECT_TRUE(IsError(core_->GetStock(too_many), absl::StatusCode::kInvalidArgument,
                      "keys: at most 1000 keys"));
}

TEST_F(CoreTest, OrderValidationNamesTheField) {
  ASSERT_OK(Adjust("sku-a", 10));
  size_t commits = store_.commits();
  auto base = [] {
    ord::CreateOrderRequest r;
    r.set_customer_id("cust-1");
    r.add_item_ids("sku-a");
    r.set_total_amount(1);
    return r;
  };
  auto r = base();
  r.clear_customer_id();
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "customer_id"));
  r = base();
  r.clear_item_ids();
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "item_ids"));
  r = base();
  r.add_item_ids("bad item");
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "item_ids[1]"));
  r = base();
  auto* line = r.add_lines();
  line->set_sku("sku-a");
  line->set_quantity(0);
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "lines[0].quantity"));
  r = base();
  r.set_total_amount(-1);
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "total_amount"));
  r.set_total_amount(std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "total_amount"));
  r = base();
  r.set_hold_ttl_ms(5);
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "hold_ttl_ms"));
  r = base();
  for (int i = 0; i < 100; ++i) r.add_item_ids("sku-a");
  EXPECT_TRUE(IsError(CreateOrder(r), absl::StatusCode::kInvalidArgument, "item_ids: at most 100"));

  EXPECT_TRUE(IsError(Pay(""), absl::StatusCode::kInvalidArgument, "order_id"));
  EXPECT_TRUE(IsError(Pay("o-1", std::string(513, 'p')), absl::StatusCode::kInvalidArgument,
                      "payment_reference"));
  EXPECT_TRUE(IsError(Advance("o-1", ord::ORDER_STATUS_PAID), absl::StatusCode::kInvalidArgument,
                      "target"));
  EXPECT_TRUE(IsError(Advance("o-1", ord::ORDER_STATUS_UNSPECIFIED),
                      absl::StatusCode::kInvalidArgument, "target"));
  EXPECT_TRUE(IsError(Advance("o-1", ord::ORDER_STATUS_PACKING, std::string(513, 'd')),
                      absl::StatusCode::kInvalidArgument, "details"));
  EXPECT_TRUE(IsError(Cancel("o 1"), absl::StatusCode::kInvalidArgument, "order_id"));
  EXPECT_EQ(store_.commits(), commits);
}

}  // namespace
}  // namespace feed::core_test

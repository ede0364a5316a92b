// The wire size of an order: protobuf (what gRPC sends) against the same order as JSON (what
// the seed's JSON/HTTP 1.1 service sent), and the cost of encoding each.
#include "benchmark/benchmark.h"
#include "google/protobuf/util/json_util.h"
#include "order/v1/order.pb.h"

namespace {

order::v1::CreateOrderRequest SampleOrder() {
  order::v1::CreateOrderRequest r;
  r.set_customer_id("cust-441");
  for (int i = 0; i < 8; ++i) r.add_item_ids("sku-" + std::to_string(101 + i * 101));
  r.set_total_amount(149.99);
  return r;
}

void BM_OrderAsProtobuf(benchmark::State& state) {
  auto order = SampleOrder();
  std::string out;
  for (auto _ : state) {
    out.clear();
    order.SerializeToString(&out);
    benchmark::DoNotOptimize(out);
  }
  state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(BM_OrderAsProtobuf);

void BM_OrderAsJson(benchmark::State& state) {
  auto order = SampleOrder();
  std::string out;
  for (auto _ : state) {
    out.clear();
    (void)google::protobuf::util::MessageToJsonString(order, &out);
    benchmark::DoNotOptimize(out);
  }
  state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(BM_OrderAsJson);

void BM_ParseOrderProtobuf(benchmark::State& state) {
  std::string bytes = SampleOrder().SerializeAsString();
  order::v1::CreateOrderRequest r;
  for (auto _ : state) benchmark::DoNotOptimize(r.ParseFromString(bytes));
}
BENCHMARK(BM_ParseOrderProtobuf);

void BM_ParseOrderJson(benchmark::State& state) {
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(SampleOrder(), &json);
  order::v1::CreateOrderRequest r;
  for (auto _ : state) {
    benchmark::DoNotOptimize(google::protobuf::util::JsonStringToMessage(json, &r).ok());
  }
}
BENCHMARK(BM_ParseOrderJson);

}  // namespace

BENCHMARK_MAIN();

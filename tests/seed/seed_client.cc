// A client built only from the seed contract (tests/seed/order.proto). Usage:
//   seed-client ADDRESS create CUSTOMER ITEM...   -> prints "order_id status timestamp"
//   seed-client ADDRESS stream ORDER_ID           -> prints "status|details" per update
// Exit code: 0 on OK, 10 + the gRPC status code otherwise (message on stderr).
#include <iostream>

#include "grpcpp/grpcpp.h"
#include "seed/order.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: seed-client ADDRESS create CUSTOMER ITEM... | stream ORDER_ID\n";
    return 2;
  }
  auto channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  auto stub = order::v1::OrderService::NewStub(channel);
  std::string command = argv[2];
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (command == "create") {
    order::v1::CreateOrderRequest request;
    request.set_customer_id(argv[3]);
    for (int i = 4; i < argc; ++i) request.add_item_ids(argv[i]);
    request.set_total_amount(149.99);
    order::v1::CreateOrderResponse response;
    grpc::Status s = stub->CreateOrder(&ctx, request, &response);
    if (!s.ok()) {
      std::cerr << s.error_code() << " " << s.error_message() << "\n";
      return 10 + s.error_code();
    }
    std::cout << response.order_id() << " " << response.status() << " " << response.timestamp()
              << "\n";
    return 0;
  }
  if (command == "stream") {
    order::v1::OrderSubscriptionRequest request;
    request.set_order_id(argv[3]);
    auto reader = stub->StreamOrderUpdates(&ctx, request);
    order::v1::OrderStatusUpdate update;
    while (reader->Read(&update)) {
      std::cout << update.status() << "|" << update.details() << std::endl;
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) {
      std::cerr << s.error_code() << " " << s.error_message() << "\n";
      return 10 + s.error_code();
    }
    return 0;
  }
  std::cerr << "unknown command " << command << "\n";
  return 2;
}

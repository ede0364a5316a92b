// fuzz_http: arbitrary bytes as one HTTP request through what the gateway does before the
// core: Beast's parser (with the gateway's header and body limits), the route table read
// from the protos' google.api.http options, and the transcoding of path variables, query
// parameters and the JSON body into the request message.
//
// Checks: nothing crashes or hangs; a refused request is INVALID_ARGUMENT with a message that
// says where (request body, query parameter, path variable, query string); an accepted one
// is a message of the route's request type whose canonical JSON parses back to the same
// message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "admin/v1/admin.pb.h"
#include "boost/beast/http.hpp"
#include "fuzz_common.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "route_table.h"
#include "transcoding.h"

namespace {

using feed::http::RouteTable;
namespace bhttp = boost::beast::http;

const RouteTable& Routes() {
  // Referencing the files' messages links them in, which registers their descriptors.
  (void)inventory::v1::ReserveRequest::descriptor();
  (void)order::v1::CreateOrderRequest::descriptor();
  (void)::admin::v1::CheckStoreRequest::descriptor();  // served too (with no route)
  static const RouteTable table = *RouteTable::FromServices(feed::http::kServedServices);
  return table;
}

bool SaysWhere(std::string_view message) {
  for (std::string_view where :
       {"request body", "query parameter", "path variable", "query string"}) {
    if (message.find(where) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(16 << 10);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;
  const auto& request = parser.get();
  std::string_view target(request.target().data(), request.target().size());
  size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  std::string_view query = question == std::string_view::npos ? "" : target.substr(question + 1);
  std::string_view verb(request.method_string().data(), request.method_string().size());

  std::vector<std::pair<std::string, std::string>> variables;
  std::vector<std::string> allowed;
  const auto* route = Routes().Find(verb, path, &variables, &allowed);
  if (route == nullptr) return 0;
  const auto* prototype = google::protobuf::MessageFactory::generated_factory()->GetPrototype(
      route->method->input_type());
  std::unique_ptr<google::protobuf::Message> message(prototype->New());
  for (bool ignore_unknown : {false, true}) {
    message->Clear();
    absl::Status built = feed::http::BuildRequest(*route, variables, query, request.body(),
                                                  {ignore_unknown}, message.get());
    if (!built.ok()) {
      FUZZ_CHECK(built.code() == absl::StatusCode::kInvalidArgument, feed::fuzz::ToString(built));
      FUZZ_CHECK(SaysWhere(std::string_view(built.message().data(), built.message().size())),
                 feed::fuzz::ToString(built));
      continue;
    }
    std::string json = feed::http::ToJson(*message);
    std::unique_ptr<google::protobuf::Message> again(prototype->New());
    auto parsed = google::protobuf::util::JsonStringToMessage(json, again.get());
    FUZZ_CHECK(parsed.ok(), json);
    FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*message, *again), json);
  }
  return 0;
}

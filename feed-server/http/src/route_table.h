// The gateway's routes, read at start-up from the `google.api.http` options of the services'
// descriptors: a newly annotated RPC needs no HTTP code. Client-streaming methods (Feed)
// have no HTTP/1.1 form and are left out.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "path_template.h"
#include "server/operations.h"

namespace feed::http {

using server::kServedServices;

struct Route {
  std::string verb;  // "GET", "POST", "PUT", "PATCH", "DELETE"
  PathTemplate path;
  // "" (no body), "*" (the whole request) or the request field the JSON body fills.
  std::string body;
  const google::protobuf::MethodDescriptor* method = nullptr;
  // "inventory.v1.InventoryService/Reserve": the name both front doors log and measure by.
  std::string grpc_method;
  bool server_streaming = false;
  // A POST to a collection whose member is served by a GET route of the same service
  // ("/v1/orders" and "/v1/orders/{order_id}"): answered 201 with a Location built from
  // the response's `created_field`.
  std::string created_field;
  std::string created_prefix;
  // The metrics label: "POST /v1/reservations/{reservation_id}:commit".
  std::string label;
};

class RouteTable {
 public:
  // Every annotated method of the named services (fully qualified, e.g.
  // "inventory.v1.InventoryService") found in the generated descriptor pool.
  static absl::StatusOr<RouteTable> FromServices(const std::vector<std::string>& services);

  // The route for `verb` + `path` and its bound variables; null when none matches. When the
  // path matches other verbs only, `allowed` lists them (405).
  const Route* Find(std::string_view verb, std::string_view path,
                    std::vector<std::pair<std::string, std::string>>* variables,
                    std::vector<std::string>* allowed) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

}  // namespace feed::http

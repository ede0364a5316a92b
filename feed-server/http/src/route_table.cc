#include "route_table.h"

#include "fmt/format.h"
#include "google/api/annotations.pb.h"

namespace feed::http {

namespace {

// The verb and path of one HttpRule (custom verbs are not supported).
absl::StatusOr<std::pair<std::string, std::string>> VerbAndPath(const google::api::HttpRule& rule) {
  switch (rule.pattern_case()) {
    case google::api::HttpRule::kGet:
      return std::pair<std::string, std::string>{"GET", rule.get()};
    case google::api::HttpRule::kPost:
      return std::pair<std::string, std::string>{"POST", rule.post()};
    case google::api::HttpRule::kPut:
      return std::pair<std::string, std::string>{"PUT", rule.put()};
    case google::api::HttpRule::kPatch:
      return std::pair<std::string, std::string>{"PATCH", rule.patch()};
    case google::api::HttpRule::kDelete:
      return std::pair<std::string, std::string>{"DELETE", rule.delete_()};
    default:
      return absl::InvalidArgumentError(
          "only get, post, put, patch and delete rules are supported");
  }
}

absl::Status AddRule(const google::protobuf::MethodDescriptor* method,
                     const google::api::HttpRule& rule, std::vector<Route>* routes) {
  auto verb_path = VerbAndPath(rule);
  if (!verb_path.ok()) return verb_path.status();
  auto path = PathTemplate::Parse(verb_path->second);
  if (!path.ok()) return path.status();
  Route route{verb_path->first, std::move(*path)};
  route.body = rule.body();
  route.method = method;
  route.grpc_method = fmt::format("{}/{}", method->service()->full_name(), method->name());
  route.server_streaming = method->server_streaming();
  route.label = fmt::format("{} {}", route.verb, route.path.text());
  if (!route.body.empty() && route.body != "*" &&
      method->input_type()->FindFieldByName(route.body) == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: body field '{}' is not a field of {}",
                                                  route.grpc_method, route.body,
                                                  method->input_type()->full_name()));
  }
  routes->push_back(std::move(route));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RouteTable> RouteTable::FromServices(const std::vector<std::string>& services) {
  RouteTable table;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const std::string& name : services) {
    const auto* service = pool->FindServiceByName(name);
    if (service == nullptr) return absl::NotFoundError(fmt::format("no service {}", name));
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* method = service->method(i);
      if (method->client_streaming()) continue;
      const auto& options = method->options();
      if (!options.HasExtension(google::api::http)) continue;
      const google::api::HttpRule& rule = options.GetExtension(google::api::http);
      if (absl::Status s = AddRule(method, rule, &table.routes_); !s.ok()) return s;
      for (const auto& extra : rule.additional_bindings()) {
        if (absl::Status s = AddRule(method, extra, &table.routes_); !s.ok()) return s;
      }
    }
  }
  // 201 + Location for a POST to a collection whose members a GET route of the same
  // service serves.
  for (Route& post : table.routes_) {
    if (post.verb != "POST" || post.server_streaming || !post.path.variables().empty()) continue;
    for (const Route& get : table.routes_) {
      std::string field;
      if (get.verb == "GET" && get.method->service() == post.method->service() &&
          get.path.IsMemberOf(post.path, &field)) {
        post.created_field = field;
        post.created_prefix = post.path.text();
      }
    }
  }
  return table;
}

const Route* RouteTable::Find(std::string_view verb, std::string_view path,
                              std::vector<std::pair<std::string, std::string>>* variables,
                              std::vector<std::string>* allowed) const {
  for (const Route& route : routes_) {
    auto bound = route.path.Match(path);
    if (!bound) continue;
    if (route.verb == verb) {
      *variables = std::move(*bound);
      return &route;
    }
    allowed->push_back(route.verb);
  }
  return nullptr;
}

}  // namespace feed::http

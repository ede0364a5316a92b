// The gateway's request dispatch: built-in pages (/healthz, /openapi.json, /swaggerui/,
// /dashboard/), then the routes from the protos: a unary route runs the method's operation (in
// cluster mode on the shard's core here, or forwarded to the shard's owner), a streaming route
// opens an NDJSON or SSE stream. No business logic here: requests and answers are translated,
// everything else is the core's.
#include "http/gateway.h"

#include <cctype>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

#include "dashboard.h"
#include "fmt/format.h"
#include "google/protobuf/message.h"
#include "http_observability.h"
#include "http_server.h"
#include "http_streams.h"
#include "inventory/v1/inventory.pb.h"
#include "nlohmann/json.hpp"
#include "route_table.h"
#include "security/authorizer.h"
#include "server/logging.h"
#include "server/operations.h"
#include "text.h"
#include "tls_context.h"
#include "transcoding.h"

namespace feed::http {

namespace {

namespace bhttp = boost::beast::http;

// Answered by the gateway itself (the router's map), like the gRPC handler does.
constexpr std::string_view kGetShardMap = "inventory.v1.InventoryService/GetShardMap";
using Clock = std::chrono::steady_clock;

std::string_view ContentTypeOf(std::string_view file) {
  if (file.ends_with(".html")) return "text/html; charset=utf-8";
  if (file.ends_with(".js")) return "application/javascript";
  if (file.ends_with(".css")) return "text/css";
  if (file.ends_with(".png")) return "image/png";
  if (file.ends_with(".json") || file.ends_with(".map")) return "application/json";
  return "application/octet-stream";
}

// Bodies are read as JSON whatever their Content-Type says (curl -d and fetch send form or
// text types by default), except for types that are certainly something else.
bool IsCertainlyNotJson(std::string_view type) {
  for (std::string_view other :
       {"multipart/", "application/xml", "text/xml", "application/grpc", "application/x-protobuf",
        "application/protobuf", "application/octet-stream"}) {
    if (StartsWithIgnoreCase(type, other)) return true;
  }
  return false;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

// The generated OpenAPI document with what security adds: a bearer security definition,
// and on each operation its security requirement, its scope (x-required-scope, from the
// same ScopeTable the calls are checked against) and the 401/403/429 answers.
std::string WithSecurity(const std::string& document, const security::ScopeTable& scopes) {
  nlohmann::json doc = nlohmann::json::parse(document, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return document;
  std::map<std::string, std::string> by_operation_id;  // "InventoryService_Reserve" -> scope
  for (const auto& [method, scope] : scopes.entries()) {
    auto slash = method.find('/');
    auto dot = method.rfind('.', slash);
    by_operation_id[method.substr(dot + 1, slash - dot - 1) + "_" + method.substr(slash + 1)] =
        scope;
  }
  doc["securityDefinitions"]["bearer"] = {
      {"type", "apiKey"},
      {"name", "Authorization"},
      {"in", "header"},
      {"description",
       "`Bearer <token>`: a signed JWT or a static token. Each operation requires one scope "
       "(x-required-scope); the token must carry it (`scope` or `scp` claim)."}};
  const nlohmann::json status_schema = {{"$ref", "#/definitions/rpcStatus"}};
  for (auto& [path, item] : doc["paths"].items()) {
    for (auto& [verb, operation] : item.items()) {
      auto id = operation.find("operationId");
      if (id == operation.end() || !id->is_string()) continue;
      // Additional bindings get a numbered id ("InventoryService_GetStock2").
      std::string op_id = id->get<std::string>();
      auto scope = by_operation_id.find(op_id);
      while (scope == by_operation_id.end() && !op_id.empty() && std::isdigit(op_id.back())) {
        op_id.pop_back();
        scope = by_operation_id.find(op_id);
      }
      if (scope == by_operation_id.end()) continue;
      operation["security"] = nlohmann::json::array({{{"bearer", nlohmann::json::array()}}});
      operation["x-required-scope"] = scope->second;
      std::string description = operation.value("description", "");
      operation["description"] = description + (description.empty() ? "" : "\n\n") +
                                 "Requires scope `" + scope->second + "`.";
      auto& responses = operation["responses"];
      responses["401"] = {{"description", "missing or invalid credentials"},
                          {"schema", status_schema}};
      responses["403"] = {{"description", "the token lacks scope " + scope->second},
                          {"schema", status_schema}};
      responses["429"] = {{"description", "over the subject's rate limit"},
                          {"schema", status_schema}};
    }
  }
  return doc.dump(2);
}

class GatewayImpl final : public Gateway {
 public:
  GatewayImpl(const HttpOptions& options, const server::ServiceContext& context,
              prometheus::Registry& registry, RouteTable routes)
      : options_(options),
        context_(context),
        routes_(std::move(routes)),
        metrics_(registry),
        access_log_(context.access_log
                        ? std::make_unique<HttpAccessLog>(context.config->log_format == "json")
                        : nullptr) {}

  absl::Status Listen() {
    if (!options_.openapi_file.empty()) {
      std::string document;
      if (ReadFile(options_.openapi_file, &document)) {
        openapi_ = WithSecurity(document, context_.auth->scopes());
      }
    }
    ServerLimits limits;
    limits.max_header_bytes = options_.max_header_bytes;
    limits.max_body_bytes = options_.max_body_bytes;
    limits.max_connections = options_.max_connections;
    limits.idle_timeout = std::chrono::milliseconds(options_.idle_timeout_ms);
    limits.read_timeout = std::chrono::milliseconds(options_.read_timeout_ms);
    limits.write_timeout = std::chrono::milliseconds(options_.write_timeout_ms);
    ServerHooks hooks;
    hooks.handle = [this](std::shared_ptr<Exchange> exchange) { Handle(std::move(exchange)); };
    hooks.error_body = [](const absl::Status& status) { return StatusJson(status); };
    hooks.rejected = [this](int status, std::string_view reason, std::string_view peer) {
      metrics_.Record("-", status, 0);
      if (access_log_) access_log_->Write("-", "-", status, 0, 0, peer);
      server::ServerLog()->debug("http: answered {} to {}: {}", status, peer, reason);
    };
    hooks.connections = [this](int delta) { metrics_.Connections(delta); };
    if (context_.config->tls.enabled()) {
      auto tls = TlsContextSource::Create(context_.config->tls);
      if (!tls.ok()) return tls.status();
      tls_ = std::move(*tls);
      hooks.tls_context = [this] { return tls_->Current(); };
      hooks.tls_failed = [](std::string_view peer, std::string_view reason) {
        server::ServerLog()->debug("http: TLS handshake with {} failed: {}", peer, reason);
      };
    }
    auto server = HttpServer::Start(options_.listen, options_.threads, limits, std::move(hooks));
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    return absl::OkStatus();
  }

  const std::string& address() const override { return server_->address(); }
  void Shutdown(std::chrono::milliseconds grace) override {
    if (server_) server_->Shutdown(grace);
  }

 private:
  // Records the metrics and the access log line of one request.
  struct Record {
    std::string method;
    std::string path;
    std::string route;
    std::string peer;
    std::string subject;
    Clock::time_point start = Clock::now();
  };
  void Finish(const Record& r, int status, size_t bytes) {
    double seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
    metrics_.Record(r.route, status, seconds);
    if (access_log_) {
      access_log_->Write(r.method, r.path, status, seconds, bytes, r.peer, r.subject);
    }
  }

  void Reply(const std::shared_ptr<Exchange>& exchange, const Record& record, Response response) {
    response.set(bhttp::field::server, "feed-server");
    int status = static_cast<int>(response.result_int());
    size_t bytes = response.body().size();
    exchange->Respond(std::move(response));
    Finish(record, status, bytes);
  }

  void ReplyStatus(const std::shared_ptr<Exchange>& exchange, const Record& record,
                   const absl::Status& status, int http_status = 0) {
    Reply(exchange, record, ErrorResponse(status, http_status));
  }

  void Handle(std::shared_ptr<Exchange> exchange) {
    const Request& request = exchange->request();
    std::string_view target(request.target().data(), request.target().size());
    size_t question = target.find('?');
    std::string_view path = target.substr(0, question);
    std::string_view query = question == std::string_view::npos ? "" : target.substr(question + 1);
    std::string_view verb(request.method_string().data(), request.method_string().size());
    Record record{std::string(verb), std::string(path), "-", exchange->peer()};

    if (verb == "GET" && ServeBuiltIn(exchange, record, path)) return;

    std::vector<std::pair<std::string, std::string>> variables;
    std::vector<std::string> allowed;
    const Route* route = routes_.Find(verb, path, &variables, &allowed);
    if (route == nullptr) {
      if (!allowed.empty()) {
        std::string allow;
        for (const auto& a : allowed) allow += (allow.empty() ? "" : ", ") + a;
        Response response =
            ErrorResponse(absl::UnimplementedError(fmt::format(
                              "{} is not served for {}; allowed: {}", verb, path, allow)),
                          405);
        response.set(bhttp::field::allow, allow);
        return Reply(exchange, record, std::move(response));
      }
      return ReplyStatus(exchange, record,
                         absl::NotFoundError(fmt::format("no route for {} {}", verb, path)));
    }
    record.route = route->label;

    auto authorization = request[bhttp::field::authorization];
    security::Decision decision = context_.auth->Authorize(
        route->grpc_method, std::string_view(authorization.data(), authorization.size()),
        exchange->tls_identity());
    if (!decision.status.ok()) {
      Response response = ErrorResponse(decision.status);
      if (!decision.challenge.empty()) {
        response.set(bhttp::field::www_authenticate, decision.challenge);
      }
      if (decision.retry_after_s > 0) {
        response.set(bhttp::field::retry_after, std::to_string(decision.retry_after_s));
      }
      return Reply(exchange, record, std::move(response));
    }
    record.subject = decision.principal->subject;

    std::string_view body(request.body());
    auto content_type = request[bhttp::field::content_type];
    std::string_view type(content_type.data(), content_type.size());
    if (!body.empty() && IsCertainlyNotJson(type)) {
      return ReplyStatus(exchange, record,
                         absl::InvalidArgumentError(fmt::format(
                             "Content-Type: '{}' is not JSON; send the request as JSON", type)),
                         415);
    }

    const auto* prototype = google::protobuf::MessageFactory::generated_factory()->GetPrototype(
        route->method->input_type());
    std::unique_ptr<google::protobuf::Message> message(prototype->New());
    TranscodeOptions transcode{options_.ignore_unknown_fields};
    if (absl::Status built = BuildRequest(*route, variables, query, body, transcode, message.get());
        !built.ok()) {
      return ReplyStatus(exchange, record, built);
    }
    if (route->server_streaming) return OpenStream(exchange, record, *route, std::move(message));
    RunUnary(exchange, std::move(record), *route, *message);
  }

  void RunUnary(const std::shared_ptr<Exchange>& exchange, Record record, const Route& route,
                google::protobuf::Message& message) {
    auto answer = [this, exchange, record, route = &route](const absl::Status& status,
                                                           const google::protobuf::Message* reply) {
      if (!status.ok()) return ReplyStatus(exchange, record, status);
      Response response(bhttp::status::ok, 11);
      response.set(bhttp::field::content_type, "application/json");
      if (!route->created_field.empty()) {
        std::string id = FindStringField(*reply, route->created_field);
        if (!id.empty()) {
          response.result(bhttp::status::created);
          response.set(bhttp::field::location, route->created_prefix + "/" + id);
        }
      }
      if (IsReplayed(*reply)) response.set("Idempotent-Replayed", "true");
      response.body() = ToJson(*reply);
      Reply(exchange, record, std::move(response));
    };
    if (route.grpc_method == kGetShardMap) {
      inventory::v1::GetShardMapResponse map;  // a single node: no shards
      if (context_.router != nullptr) map = context_.router->ShardMap();
      return answer(absl::OkStatus(), &map);
    }
    const server::Operation* operation = server::FindOperation(route.grpc_method);
    if (operation == nullptr) {
      return ReplyStatus(
          exchange, record,
          absl::UnimplementedError(fmt::format("{} has no operation", route.grpc_method)));
    }
    server::CallOptions call;
    call.actor = record.subject;
    const Request& request = exchange->request();
    if (auto it = request.find("Idempotency-Key"); it != request.end()) {
      call.idempotency_key = std::string(it->value());
    }
    if (context_.router == nullptr) {
      return operation->Run(*context_.core, message, std::move(call), std::move(answer));
    }
    // Cluster mode: the shard's core when this node serves it, else the owner runs the call.
    auto routed = context_.router->Route(route.grpc_method, message);
    if (routed.ok()) return operation->Run(**routed, message, std::move(call), std::move(answer));
    std::optional<std::string> owner = server::ShardOwnerOf(routed.status());
    if (!owner.has_value() || context_.forwarder == nullptr) {
      return answer(routed.status(), nullptr);
    }
    std::vector<std::pair<std::string, std::string>> headers;
    if (auto it = request.find(bhttp::field::authorization); it != request.end()) {
      headers.emplace_back("authorization", std::string(it->value()));
    }
    if (!call.idempotency_key.empty())
      headers.emplace_back("idempotency-key", call.idempotency_key);
    const auto* reply_prototype =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(
            route.method->output_type());
    context_.forwarder->Forward(*owner, route.grpc_method, message, *reply_prototype,
                                std::move(headers), std::move(answer));
  }

  void OpenStream(const std::shared_ptr<Exchange>& exchange, Record record, const Route& route,
                  std::unique_ptr<google::protobuf::Message> message) {
    const Request& request = exchange->request();
    auto accept = request[bhttp::field::accept];
    Framing framing = std::string_view(accept.data(), accept.size()).find("text/event-stream") !=
                              std::string_view::npos
                          ? Framing::kServerSentEvents
                          : Framing::kNdjson;
    auto done = [this, record](const StreamEnd& end) {
      Finish(record, end.http_status, end.bytes);
    };
    const StreamSettings settings{framing, std::chrono::milliseconds(options_.sse_heartbeat_ms)};
    if (auto* watch = dynamic_cast<inventory::v1::WatchStockRequest*>(message.get())) {
      if (auto it = request.find("Last-Event-ID"); it != request.end()) {
        uint64_t after = 0;
        std::string_view value(it->value().data(), it->value().size());
        if (!ParseNumber(value, &after)) {
          return ReplyStatus(exchange, record,
                             absl::InvalidArgumentError(fmt::format(
                                 "Last-Event-ID: '{}' is not a sequence number", value)));
        }
        watch->set_resume_after_sequence(after);
      }
      return ServeStockStream(context_, exchange, std::move(*watch), settings, std::move(done));
    }
    if (auto* orders = dynamic_cast<order::v1::OrderSubscriptionRequest*>(message.get())) {
      return ServeOrderStream(context_, exchange, std::move(*orders), settings, std::move(done));
    }
    ReplyStatus(
        exchange, record,
        absl::UnimplementedError(fmt::format("{} is not served over HTTP", route.grpc_method)));
  }

  // /healthz, /openapi.json, /swaggerui/...: true when answered.
  bool ServeBuiltIn(const std::shared_ptr<Exchange>& exchange, Record& record,
                    std::string_view path) {
    if (path == "/healthz") {
      record.route = "GET /healthz";
      Response response(bhttp::status::ok, 11);
      response.set(bhttp::field::content_type, "application/json");
      response.body() = R"({"status":"SERVING"})";
      Reply(exchange, record, std::move(response));
      return true;
    }
    if (path == "/openapi.json" && !openapi_.empty()) {
      record.route = "GET /openapi.json";
      Response response(bhttp::status::ok, 11);
      response.set(bhttp::field::content_type, "application/json");
      response.body() = openapi_;
      Reply(exchange, record, std::move(response));
      return true;
    }
    if (path.starts_with("/dashboard")) {
      ServeDashboard(exchange, record, path);
      return true;
    }
    if (options_.swagger_ui_dir.empty() || !path.starts_with("/swaggerui")) return false;
    record.route = "GET /swaggerui/";
    if (path == "/swaggerui") {
      Response response(bhttp::status::moved_permanently, 11);
      response.set(bhttp::field::location, "/swaggerui/");
      Reply(exchange, record, std::move(response));
      return true;
    }
    std::string_view file = path.substr(std::string_view("/swaggerui/").size());
    if (file.empty()) file = "index.html";
    if (file == "swagger-initializer.js") {
      // Swagger UI's start-up script, pointed at this server's document.
      Response response(bhttp::status::ok, 11);
      response.set(bhttp::field::content_type, "application/javascript");
      response.body() =
          "window.onload = function () {\n"
          "  window.ui = SwaggerUIBundle({url: '/openapi.json', dom_id: '#swagger-ui',\n"
          "    deepLinking: true, presets: [SwaggerUIBundle.presets.apis, "
          "SwaggerUIStandalonePreset],\n"
          "    plugins: [SwaggerUIBundle.plugins.DownloadUrl], layout: 'StandaloneLayout'});\n"
          "};\n";
      Reply(exchange, record, std::move(response));
      return true;
    }
    if (file.find('/') != std::string_view::npos || file.find("..") != std::string_view::npos) {
      ReplyStatus(exchange, record, absl::NotFoundError(fmt::format("no such file: {}", path)));
      return true;
    }
    ServeFile(exchange, record, options_.swagger_ui_dir + "/" + std::string(file),
              ContentTypeOf(file));
    return true;
  }

  // The dashboard (dashboard.h): its pages need nothing; its status needs what GetStock needs
  // (the page sends the same bearer token for both).
  void ServeDashboard(const std::shared_ptr<Exchange>& exchange, Record& record,
                      std::string_view path) {
    record.route = "GET /dashboard/";
    if (path == "/dashboard") {
      Response response(bhttp::status::moved_permanently, 11);
      response.set(bhttp::field::location, "/dashboard/");
      return Reply(exchange, record, std::move(response));
    }
    if (path == "/dashboard/status.json" && context_.status) {
      record.route = "GET /dashboard/status.json";
      auto authorization = exchange->request()[bhttp::field::authorization];
      security::Decision decision = context_.auth->Authorize(
          "inventory.v1.InventoryService/GetStock",
          std::string_view(authorization.data(), authorization.size()), exchange->tls_identity());
      if (!decision.status.ok()) return ReplyStatus(exchange, record, decision.status);
      record.subject = decision.principal->subject;
      Response response(bhttp::status::ok, 11);
      response.set(bhttp::field::content_type, "application/json");
      response.set(bhttp::field::cache_control, "no-store");
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      response.body() = DashboardStatusJson(context_.status(), now_ms);
      return Reply(exchange, record, std::move(response));
    }
    std::optional<std::string> file = DashboardFile(options_, path);
    if (!file) {
      return ReplyStatus(exchange, record,
                         absl::NotFoundError(fmt::format("no such page: {}", path)));
    }
    ServeFile(exchange, record, *file, ContentTypeOf(*file));
  }

  void ServeFile(const std::shared_ptr<Exchange>& exchange, const Record& record,
                 const std::string& file, std::string_view content_type) {
    Response response(bhttp::status::ok, 11);
    if (!ReadFile(file, &response.body())) {
      return ReplyStatus(exchange, record,
                         absl::NotFoundError(fmt::format("not found: {}", record.path)));
    }
    response.set(bhttp::field::content_type,
                 boost::beast::string_view(content_type.data(), content_type.size()));
    Reply(exchange, record, std::move(response));
  }

  const HttpOptions options_;
  const server::ServiceContext context_;
  const RouteTable routes_;
  HttpMetrics metrics_;
  std::unique_ptr<HttpAccessLog> access_log_;
  std::string openapi_;  // the served document (WithSecurity)
  std::unique_ptr<TlsContextSource> tls_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Start(const HttpOptions& options,
                                                        const server::ServiceContext& context,
                                                        prometheus::Registry& registry) {
  auto routes = RouteTable::FromServices(kServedServices);
  if (!routes.ok()) return routes.status();
  auto gateway = std::make_unique<GatewayImpl>(options, context, registry, std::move(*routes));
  if (absl::Status s = gateway->Listen(); !s.ok()) return s;
  return std::unique_ptr<Gateway>(std::move(gateway));
}

}  // namespace feed::http

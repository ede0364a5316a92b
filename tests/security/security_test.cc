// Security over real loopback gRPC and HTTP: TLS and mutual TLS (refusals, certificate
// renewal without a restart), bearer tokens and scopes on every method and route, the
// per-subject rate limit, the actor of events, and no secret in any log line.
#include <sys/wait.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "app/feed_server.h"
#include "core/change_feed.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "order/v1/order.grpc.pb.h"
#include "security/scope_table.h"
#include "server/operations.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "token_util.h"

namespace feed::test {
namespace {

namespace inv = inventory::v1;
namespace ord = order::v1;
using namespace std::chrono_literals;

const std::string kSecret = "security-test-hs256-secret-0123456789abcdef";
const std::string kAdminToken = "admin-token-7f3a9c1e5b2d4a6f";
const std::string kReaderToken = "reader-token-1b2c3d4e5f6a7b8c";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int Shell(const std::string& command, std::string* out = nullptr) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  char buffer[4096];
  std::string text;
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, p)) > 0) text.append(buffer, n);
  int status = pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A unary call by method path with an empty request (every request type parses from it).
grpc::Status GenericUnary(const std::shared_ptr<grpc::Channel>& channel, const std::string& path) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 3s);
  grpc::Slice empty("", 0);
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, path, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    std::lock_guard lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

// Collects every event's actor.
class ActorRecorder : public core::ChangeListener {
 public:
  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    for (const auto& e : events) actors_.push_back(e->actor());
  }
  std::vector<std::string> actors() {
    std::lock_guard lock(mu_);
    return actors_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> actors_;
};

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/feed-security-XXXXXX";
    dir_ = mkdtemp(tmpl);
    certs_ = dir_ + "/certs";
    ASSERT_EQ(Shell(std::string(FEED_SOURCE_DIR) + "/compose/dev-certs.sh " + certs_ + " 2>&1"), 0);
    std::ofstream(dir_ + "/secret") << kSecret << "\n";
    std::ofstream(dir_ + "/tokens") << kAdminToken
                                    << " ops stock:read stock:adjust stock:reserve orders:read "
                                       "orders:write\n"
                                    << kReaderToken << " dashboard stock:read\n"
                                    << "mtls:spiffe://feed/client scanner stock:read\n";
    // Every line any module logs goes here, so that TearDown can look for secrets in it.
    spdlog::drop_all();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("", sink));
    spdlog::set_level(spdlog::level::debug);

    config_.listen = "127.0.0.1:0";
    config_.metrics_listen = "";
    config_.http.listen = "127.0.0.1:0";
    config_.http.openapi_file = FEED_OPENAPI_FILE;
    config_.storage.path = dir_ + "/data";
    config_.storage.durability = storage::Durability::kAsync;
    config_.log_rpcs = true;
    config_.shutdown_grace_ms = 1000;
    config_.auth.token_file = dir_ + "/tokens";
    config_.auth.jwt.hs_secret_file = dir_ + "/secret";
    config_.auth.jwt.issuer = "https://issuer.test";
  }

  void TearDown() override {
    if (server_) server_->core().change_feed().Unsubscribe(&actors_);
    server_.reset();
    spdlog::default_logger()->flush();
    const std::string logged = log_.str();
    EXPECT_FALSE(logged.empty());
    for (const std::string& secret :
         {kSecret, kAdminToken, kReaderToken, jwt_, test::Base64Url(kSecret)}) {
      if (secret.empty()) continue;
      EXPECT_EQ(logged.find(secret), std::string::npos) << "a secret is in the log";
    }
    for (const char* key : {"server.key", "client.key"}) {
      std::string pem = ReadAll(certs_ + "/" + key);
      auto begin = pem.find('\n') + 1;
      std::string body = pem.substr(begin, 40);
      EXPECT_EQ(logged.find(body), std::string::npos) << key << " is in the log";
    }
    spdlog::drop_all();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(""));
    std::filesystem::remove_all(dir_);
  }

  void UseTls(bool mutual) {
    config_.tls.cert_file = certs_ + "/server.crt";
    config_.tls.key_file = certs_ + "/server.key";
    if (mutual) config_.tls.client_ca_file = certs_ + "/ca.crt";
    config_.tls.reload_interval_ms = 1000;
  }

  void Start() {
    auto server = server::FeedServer::Start(config_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->core().change_feed().Subscribe(&actors_, UINT64_MAX);
  }

  // A channel trusting `ca` (a file in certs_), presenting `client` (".crt"/".key" stem) if set.
  std::shared_ptr<grpc::Channel> TlsChannel(const std::string& ca, const std::string& client = "") {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadAll(certs_ + "/" + ca);
    if (!client.empty()) {
      o.pem_cert_chain = ReadAll(certs_ + "/" + client + ".crt");
      o.pem_private_key = ReadAll(certs_ + "/" + client + ".key");
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
    return grpc::CreateCustomChannel("localhost:" + Port(server_->address()),
                                     grpc::SslCredentials(o), args);
  }
  std::shared_ptr<grpc::Channel> Plain() {
    return grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }
  static std::string Port(const std::string& address) {
    return address.substr(address.rfind(':') + 1);
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + 3s);
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }

  grpc::Status GetStock(const std::shared_ptr<grpc::Channel>& channel, const std::string& token,
                        inv::GetStockResponse* out = nullptr) {
    inv::GetStockRequest req;
    req.add_keys()->set_sku("SKU-1");
    inv::GetStockResponse resp;
    return inv::InventoryService::NewStub(channel)->GetStock(Ctx(token).get(), req,
                                                             out ? out : &resp);
  }

  grpc::Status Adjust(const std::shared_ptr<grpc::Channel>& channel, const std::string& token,
                      int64_t quantity, grpc::ClientContext* ctx = nullptr) {
    inv::AdjustStockRequest req;
    req.set_sku("SKU-1");
    req.set_mode(inv::ADJUST_MODE_SET);
    req.set_quantity(quantity);
    inv::AdjustStockResponse resp;
    auto own = Ctx(token);
    return inv::InventoryService::NewStub(channel)->AdjustStock(ctx ? ctx : own.get(), req, &resp);
  }

  int64_t OnHand() {
    inv::GetStockResponse resp;
    EXPECT_TRUE(GetStock(channel_, kAdminToken, &resp).ok());
    return resp.levels_size() ? resp.levels(0).on_hand() : -1;
  }

  // curl against the HTTPS port: returns the HTTP status, 0 when the connection failed.
  int Curl(const std::string& ca, const std::string& client, const std::string& path,
           const std::string& token = "", std::string* body = nullptr) {
    std::string cmd = "curl -s -o " + dir_ + "/curl.out -w '%{http_code}' --max-time 5 --cacert " +
                      certs_ + "/" + ca;
    if (!client.empty()) {
      cmd += " --cert " + certs_ + "/" + client + ".crt --key " + certs_ + "/" + client + ".key";
    }
    if (!token.empty()) cmd += " -H 'authorization: Bearer " + token + "'";
    cmd += " 'https://localhost:" + Port(server_->http_address()) + path + "' 2>/dev/null";
    std::string out;
    Shell(cmd, &out);
    if (body) *body = ReadAll(dir_ + "/curl.out");
    return out.empty() ? 0 : std::atoi(out.c_str());
  }

  std::string dir_;
  std::string certs_;
  std::string jwt_;
  std::ostringstream log_;
  server::ServerConfig config_;
  std::unique_ptr<server::FeedServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  ActorRecorder actors_;
};

TEST_F(SecurityTest, TlsRefusesPlaintextAndUnknownCas) {
  UseTls(false);
  Start();
  channel_ = TlsChannel("ca.crt");
  EXPECT_TRUE(GetStock(channel_, kReaderToken).ok());
  grpc::Status plain = GetStock(Plain(), kReaderToken);
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
  grpc::Status unknown = GetStock(TlsChannel("other-ca.crt"), kReaderToken);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNAVAILABLE) << unknown.error_message();

  EXPECT_EQ(Curl("ca.crt", "", "/v1/stock?sku=SKU-1", kReaderToken), 200);
  EXPECT_EQ(Curl("other-ca.crt", "", "/v1/stock?sku=SKU-1", kReaderToken), 0);
  // Plaintext HTTP against the TLS port gets no answer.
  HttpConnection raw(server_->http_address(), 2000);
  HttpReply reply = raw.Call("GET", "/healthz");
  EXPECT_EQ(reply.status, 0);
}

TEST_F(SecurityTest, MutualTlsRefusesMissingAndForeignClientCertificates) {
  UseTls(true);
  Start();
  channel_ = TlsChannel("ca.crt", "client");
  EXPECT_TRUE(GetStock(channel_, kReaderToken).ok());
  EXPECT_EQ(GetStock(TlsChannel("ca.crt"), kReaderToken).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GetStock(TlsChannel("ca.crt", "other-client"), kReaderToken).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The certificate's identity is known to the token file: no token needed for its scopes.
  EXPECT_TRUE(GetStock(channel_, "").ok());
  EXPECT_EQ(Adjust(channel_, "", 5).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  EXPECT_EQ(Curl("ca.crt", "client", "/v1/stock?sku=SKU-1"), 200);
  EXPECT_EQ(Curl("ca.crt", "", "/v1/stock?sku=SKU-1", kReaderToken), 0);
  EXPECT_EQ(Curl("ca.crt", "other-client", "/v1/stock?sku=SKU-1", kReaderToken), 0);
  // The access log names the subject of each call.
  spdlog::default_logger()->flush();
  EXPECT_NE(log_.str().find("subject=scanner"), std::string::npos);
}

TEST_F(SecurityTest, RenewedCertificateIsServedWithoutRestartAndBrokenOneIsIgnored) {
  UseTls(false);
  Start();
  channel_ = TlsChannel("ca.crt");
  ASSERT_TRUE(GetStock(channel_, kReaderToken).ok());
  // A new server certificate from another CA, renamed into place (key first).
  const std::string fresh = dir_ + "/fresh";
  ASSERT_EQ(Shell(std::string(FEED_SOURCE_DIR) + "/compose/dev-certs.sh " + fresh + " 2>&1"), 0);
  std::filesystem::copy_file(fresh + "/ca.crt", certs_ + "/fresh-ca.crt");
  std::filesystem::copy_file(fresh + "/server.key", certs_ + "/server.key.new");
  std::filesystem::copy_file(fresh + "/server.crt", certs_ + "/server.crt.new");
  std::filesystem::rename(certs_ + "/server.key.new", certs_ + "/server.key");
  std::filesystem::rename(certs_ + "/server.crt.new", certs_ + "/server.crt");
  bool grpc_renewed = false;
  bool http_renewed = false;
  for (auto deadline = std::chrono::steady_clock::now() + 20s;
       std::chrono::steady_clock::now() < deadline && !(grpc_renewed && http_renewed);) {
    grpc_renewed = grpc_renewed || GetStock(TlsChannel("fresh-ca.crt"), kReaderToken).ok();
    http_renewed =
        http_renewed || Curl("fresh-ca.crt", "", "/v1/stock?sku=SKU-1", kReaderToken) == 200;
    std::this_thread::sleep_for(300ms);
  }
  EXPECT_TRUE(grpc_renewed) << "gRPC still serves the old certificate";
  EXPECT_TRUE(http_renewed) << "HTTP still serves the old certificate";

  // A broken certificate file: the renewed one stays in service.
  std::ofstream(certs_ + "/server.crt.new") << "-----BEGIN CERTIFICATE-----\nbroken\n";
  std::filesystem::rename(certs_ + "/server.crt.new", certs_ + "/server.crt");
  std::this_thread::sleep_for(2500ms);
  grpc::Status after_broken = GetStock(TlsChannel("fresh-ca.crt"), kReaderToken);
  EXPECT_TRUE(after_broken.ok()) << after_broken.error_message();
  EXPECT_EQ(Curl("fresh-ca.crt", "", "/v1/stock?sku=SKU-1", kReaderToken), 200);
  spdlog::default_logger()->flush();
  EXPECT_NE(log_.str().find("still serving the previous certificate"), std::string::npos);
}

TEST_F(SecurityTest, BadTokensGetTheRightStatusAndChangeNothing) {
  Start();
  channel_ = Plain();
  ASSERT_TRUE(Adjust(channel_, kAdminToken, 7).ok());
  const auto rsa = MakeKeyPair(true);
  const std::string iss = R"("iss":"https://issuer.test")";
  jwt_ = SignJwt(JWT_ALG_HS256, kSecret, Claims("ops", "stock:adjust", iss));
  struct Case {
    std::string name;
    std::string header;  // the whole authorization value; empty: none
    grpc::StatusCode code;
    int http;
  };
  const std::vector<Case> cases = {
      {"missing", "", grpc::StatusCode::UNAUTHENTICATED, 401},
      {"malformed", "Token abc", grpc::StatusCode::UNAUTHENTICATED, 401},
      {"unknown", "Bearer no-such-token-000000", grpc::StatusCode::UNAUTHENTICATED, 401},
      {"expired",
       "Bearer " + SignJwt(JWT_ALG_HS256, kSecret, Claims("ops", "stock:adjust", iss, -3600)),
       grpc::StatusCode::UNAUTHENTICATED, 401},
      {"not yet valid",
       "Bearer " +
           SignJwt(JWT_ALG_HS256, kSecret,
                   Claims("ops", "stock:adjust", iss + ",\"nbf\":" + std::to_string(Now() + 3600))),
       grpc::StatusCode::UNAUTHENTICATED, 401},
      {"wrong issuer",
       "Bearer " + SignJwt(JWT_ALG_HS256, kSecret,
                           Claims("ops", "stock:adjust", R"("iss":"https://evil.test")")),
       grpc::StatusCode::UNAUTHENTICATED, 401},
      {"bad signature",
       "Bearer " + SignJwt(JWT_ALG_HS256, kSecret + "-wrong", Claims("ops", "stock:adjust", iss)),
       grpc::StatusCode::UNAUTHENTICATED, 401},
      {"alg none", "Bearer " + UnsignedJwt(Claims("ops", "stock:adjust", iss)),
       grpc::StatusCode::UNAUTHENTICATED, 401},
      {"alg confusion",
       "Bearer " + SignJwt(JWT_ALG_HS256, rsa.public_pem, Claims("ops", "stock:adjust", iss)),
       grpc::StatusCode::UNAUTHENTICATED, 401},
      {"missing scope", "Bearer " + kReaderToken, grpc::StatusCode::PERMISSION_DENIED, 403},
  };
  for (const Case& c : cases) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 3s);
    if (!c.header.empty()) ctx.AddMetadata("authorization", c.header);
    grpc::Status s = Adjust(channel_, "", 0, &ctx);
    EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
    if (!c.header.empty()) {
      EXPECT_EQ(s.error_message().find(c.header.substr(c.header.find(' ') + 1)), std::string::npos)
          << c.name << ": the message echoes the token";
    }
    auto challenge = ctx.GetServerTrailingMetadata().find("www-authenticate");
    ASSERT_NE(challenge, ctx.GetServerTrailingMetadata().end()) << c.name;
    if (c.code == grpc::StatusCode::PERMISSION_DENIED) {
      EXPECT_NE(std::string(challenge->second.data(), challenge->second.size())
                    .find(R"(error="insufficient_scope")"),
                std::string::npos);
      EXPECT_NE(s.error_message().find("stock:adjust"), std::string::npos) << s.error_message();
    }

    HttpConnection http(server_->http_address());
    std::map<std::string, std::string> headers;
    if (!c.header.empty()) headers["authorization"] = c.header;
    HttpReply r = http.Call("POST", "/v1/stock:adjust",
                            R"({"sku":"SKU-1","mode":"ADJUST_MODE_SET","quantity":0})", headers);
    EXPECT_EQ(r.status, c.http) << c.name << ": " << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/json") << c.name;
    EXPECT_NE(r.header("WWW-Authenticate").find("Bearer"), std::string::npos) << c.name;
    if (c.http == 403) {
      EXPECT_NE(r.header("WWW-Authenticate").find(R"(error="insufficient_scope")"),
                std::string::npos);
    }
  }
  EXPECT_EQ(OnHand(), 7) << "a refused call changed the store";
  // The good token does change it, and the event records who.
  grpc::ClientContext ok;
  ok.AddMetadata("authorization", "Bearer " + jwt_);
  ASSERT_TRUE(Adjust(channel_, "", 9, &ok).ok());
  EXPECT_EQ(OnHand(), 9);
  std::vector<std::string> actors = actors_.actors();
  ASSERT_EQ(actors.size(), 2u);
  EXPECT_EQ(actors[0], "ops");  // the static admin token's subject
  EXPECT_EQ(actors[1], "ops");  // the JWT's sub
}

// Every RPC and every HTTP route refuses a call without credentials: the scope table is
// enforced, not only declared.
TEST_F(SecurityTest, EveryMethodAndRouteRequiresCredentials) {
  Start();
  channel_ = Plain();
  size_t unary = 0;
  std::set<std::string> streaming;
  for (const auto& name : server::kServedServices) {
    const auto* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    ASSERT_NE(service, nullptr);
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* m = service->method(i);
      std::string path = "/" + service->full_name() + "/" + m->name();
      if (m->client_streaming() || m->server_streaming()) {
        streaming.insert(path);
        continue;
      }
      ++unary;
      grpc::Status status = GenericUnary(channel_, path);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << path;
    }
  }
  EXPECT_EQ(unary, 16u);  // a new unary method must show up here
  // The streams, through their stubs; a new streaming method fails this list.
  EXPECT_EQ(streaming, (std::set<std::string>{"/inventory.v1.InventoryService/WatchStock",
                                              "/inventory.v1.InventoryService/Feed",
                                              "/order.v1.OrderService/StreamOrderUpdates"}));
  auto stub = inv::InventoryService::NewStub(channel_);
  {
    auto ctx = Ctx();
    inv::WatchStockRequest req;
    auto reader = stub->WatchStock(ctx.get(), req);
    inv::StockUpdate u;
    EXPECT_FALSE(reader->Read(&u));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto ctx = Ctx();
    auto stream = stub->Feed(ctx.get());
    inv::FeedResponse r;
    EXPECT_FALSE(stream->Read(&r));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto ctx = Ctx();
    ord::OrderSubscriptionRequest req;
    req.set_order_id("o-1");
    auto reader = ord::OrderService::NewStub(channel_)->StreamOrderUpdates(ctx.get(), req);
    ord::OrderStatusUpdate u;
    EXPECT_FALSE(reader->Read(&u));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // HTTP: each route of the OpenAPI document, without a token.
  HttpConnection http(server_->http_address());
  HttpReply doc = http.Call("GET", "/openapi.json");
  ASSERT_EQ(doc.status, 200);
  auto openapi = nlohmann::json::parse(doc.body);
  ASSERT_TRUE(openapi.contains("securityDefinitions"));
  size_t routes = 0;
  for (auto& [path, item] : openapi["paths"].items()) {
    for (auto& [verb, op] : item.items()) {
      ++routes;
      EXPECT_TRUE(op.contains("x-required-scope")) << verb << " " << path;
      EXPECT_TRUE(op.contains("security")) << verb << " " << path;
      std::string target = path;
      for (size_t b; (b = target.find('{')) != std::string::npos;) {
        target.replace(b, target.find('}', b) - b + 1, "x");
      }
      std::string method = verb;
      std::transform(method.begin(), method.end(), method.begin(), ::toupper);
      HttpReply r = http.Call(method, target, method == "GET" ? "" : "{}");
      EXPECT_EQ(r.status, 401) << method << " " << target << ": " << r.body;
    }
  }
  EXPECT_GE(routes, 14u);
  // Health stays open, as load balancers and grpc-health-probe expect.
  EXPECT_EQ(http.Call("GET", "/healthz").status, 200);
  EXPECT_TRUE(GenericUnary(channel_, "/grpc.health.v1.Health/Check").ok());
}

TEST_F(SecurityTest, RateLimitPerSubjectOnBothDoors) {
  config_.auth.rate_limit = 0.5;
  config_.auth.rate_burst = 3;
  Start();
  channel_ = Plain();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(GetStock(channel_, kReaderToken).ok()) << i;
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + kReaderToken);
  inv::GetStockRequest req;
  req.add_keys()->set_sku("SKU-1");
  inv::GetStockResponse resp;
  grpc::Status limited = inv::InventoryService::NewStub(channel_)->GetStock(&ctx, req, &resp);
  EXPECT_EQ(limited.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << limited.error_message();
  EXPECT_NE(ctx.GetServerTrailingMetadata().find("retry-after"),
            ctx.GetServerTrailingMetadata().end());
  HttpConnection http(server_->http_address());
  HttpReply r =
      http.Call("GET", "/v1/stock?sku=SKU-1", "", {{"authorization", "Bearer " + kReaderToken}});
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_FALSE(r.header("Retry-After").empty());
  // Another subject is not held back.
  EXPECT_TRUE(GetStock(channel_, kAdminToken).ok());
}

// A port free right now on 127.0.0.1 (prometheus-cpp needs a fixed one).
int FreePort() {
  net::io_context ioc;
  net::ip::tcp::acceptor acceptor(ioc, {net::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

TEST_F(SecurityTest, MetricsAskForBasicAuthentication) {
  std::ofstream(dir_ + "/metrics-users") << "# user:password\nprometheus:scrape-secret-42\n";
  config_.metrics_listen = "127.0.0.1:" + std::to_string(FreePort());
  config_.metrics_basic_auth_file = dir_ + "/metrics-users";
  Start();
  auto scrape = [&](const std::map<std::string, std::string>& headers) {
    HttpConnection http(config_.metrics_listen);
    return http.Call("GET", "/metrics", "", headers);
  };
  EXPECT_EQ(scrape({}).status, 401);
  EXPECT_EQ(scrape({{"Authorization", "Basic " + test::Base64Url("prometheus:wrong")}}).status,
            401);
  HttpReply ok = scrape({{"Authorization", "Basic cHJvbWV0aGV1czpzY3JhcGUtc2VjcmV0LTQy"}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find("feed_"), std::string::npos);
  EXPECT_EQ(ok.body.find("scrape-secret-42"), std::string::npos);
}

}  // namespace
}  // namespace feed::test

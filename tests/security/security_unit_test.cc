// The security module without a network: JWT verification (every way a token can be wrong),
// static tokens, the scope table read from the protos, the authorizer's statuses and
// challenges, reloads and the rate limiter.
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "security/authorizer.h"
#include "security/jwt_verifier.h"
#include "security/rate_limiter.h"
#include "security/scope_table.h"
#include "security/static_tokens.h"
#include "server/operations.h"
#include "token_util.h"

namespace feed::security {
namespace {

using test::Claims;
using test::SignJwt;

const std::string kSecret = "0123456789abcdef0123456789abcdef-hs-secret";
// A served service's descriptor exists once its generated code is linked in.
[[maybe_unused]] const bool kServicesLinked =
    inventory::v1::GetStockRequest::descriptor() != nullptr &&
    order::v1::GetOrderRequest::descriptor() != nullptr;

class JwtTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = new test::KeyPair(test::MakeKeyPair(true));
    ec_ = new test::KeyPair(test::MakeKeyPair(false));
    other_rsa_ = new test::KeyPair(test::MakeKeyPair(true));
  }
  absl::StatusOr<Principal> Verify(const std::shared_ptr<const JwtKeys>& keys,
                                   const std::string& token) {
    return VerifyJwt(*keys, options_, token, test::Now());
  }
  std::shared_ptr<const JwtKeys> Rsa() { return JwtKeys::FromMaterial("", rsa_->public_pem, true); }
  std::shared_ptr<const JwtKeys> Ec() { return JwtKeys::FromMaterial("", ec_->public_pem, false); }
  std::shared_ptr<const JwtKeys> Hs() { return JwtKeys::FromMaterial(kSecret, "", false); }

  void ExpectRejected(const std::shared_ptr<const JwtKeys>& keys, const std::string& token,
                      const std::string& reason) {
    auto p = Verify(keys, token);
    ASSERT_FALSE(p.ok()) << reason;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated) << p.status();
    EXPECT_NE(std::string(p.status().message()).find(reason), std::string::npos) << p.status();
    EXPECT_EQ(std::string(p.status().message()).find(token), std::string::npos)
        << "the message echoes the token";
  }

  JwtOptions options_{.issuer = "https://issuer.test", .audience = "feed-server", .leeway_s = 30};
  const std::string good_ =
      R"("iss":"https://issuer.test","aud":["other","feed-server"],"scp":["stock:adjust"])";
  static test::KeyPair* rsa_;
  static test::KeyPair* ec_;
  static test::KeyPair* other_rsa_;
};
test::KeyPair* JwtTest::rsa_ = nullptr;
test::KeyPair* JwtTest::ec_ = nullptr;
test::KeyPair* JwtTest::other_rsa_ = nullptr;

TEST_F(JwtTest, AcceptsRs256Es256AndHs256WithBothScopeClaims) {
  auto p = Verify(Rsa(), SignJwt(JWT_ALG_RS256, rsa_->private_pem,
                                 Claims("checkout", "stock:read stock:reserve", good_)));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->subject, "checkout");
  EXPECT_EQ(std::set<std::string>(p->scopes.begin(), p->scopes.end()),
            (std::set<std::string>{"stock:read", "stock:reserve", "stock:adjust"}));
  EXPECT_EQ(p->method, "jwt");
  auto e = Verify(Ec(), SignJwt(JWT_ALG_ES256, ec_->private_pem, Claims("ec", "", good_)));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->scopes, std::vector<std::string>{"stock:adjust"});
  auto h = Verify(Hs(), SignJwt(JWT_ALG_HS256, kSecret,
                                Claims("hs", "orders:read",
                                       R"("iss":"https://issuer.test","aud":"feed-server")")));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->scopes, std::vector<std::string>{"orders:read"});
}

TEST_F(JwtTest, RefusesExpiredAndNotYetValidBeyondTheLeeway) {
  ExpectRejected(Rsa(), SignJwt(JWT_ALG_RS256, rsa_->private_pem, Claims("a", "", good_, -60)),
                 "expired");
  // Within the 30 s leeway: accepted.
  EXPECT_TRUE(
      Verify(Rsa(), SignJwt(JWT_ALG_RS256, rsa_->private_pem, Claims("a", "", good_, -10))).ok());
  std::string nbf = good_ + ",\"nbf\":" + std::to_string(test::Now() + 120);
  ExpectRejected(Rsa(), SignJwt(JWT_ALG_RS256, rsa_->private_pem, Claims("a", "", nbf)),
                 "not valid yet");
  ExpectRejected(Rsa(),
                 SignJwt(JWT_ALG_RS256, rsa_->private_pem,
                         R"({"sub":"a","iss":"https://issuer.test","aud":"feed-server"})"),
                 "no exp");
}

TEST_F(JwtTest, RefusesWrongIssuerAudienceAndMissingSubject) {
  ExpectRejected(Rsa(),
                 SignJwt(JWT_ALG_RS256, rsa_->private_pem,
                         Claims("a", "", R"("iss":"https://evil.test","aud":"feed-server")")),
                 "issuer");
  ExpectRejected(Rsa(),
                 SignJwt(JWT_ALG_RS256, rsa_->private_pem,
                         Claims("a", "", R"("iss":"https://issuer.test","aud":["other"])")),
                 "audience");
  ExpectRejected(Rsa(),
                 SignJwt(JWT_ALG_RS256, rsa_->private_pem,
                         Claims("", "", R"("iss":"https://issuer.test","aud":"feed-server")")),
                 "no sub");
}

TEST_F(JwtTest, RefusesBadSignatures) {
  std::string token = SignJwt(JWT_ALG_RS256, rsa_->private_pem, Claims("a", "", good_));
  ExpectRejected(Rsa(), SignJwt(JWT_ALG_RS256, other_rsa_->private_pem, Claims("a", "", good_)),
                 "signature");
  std::string tampered = token;
  tampered[tampered.size() - 5] = tampered[tampered.size() - 5] == 'A' ? 'B' : 'A';
  ExpectRejected(Rsa(), tampered, "signature");
  // The claims changed under the same signature (a scope added).
  auto dot1 = token.find('.');
  auto dot2 = token.rfind('.');
  std::string forged =
      token.substr(0, dot1 + 1) + test::Base64Url(Claims("a", "admin", good_)) + token.substr(dot2);
  ExpectRejected(Rsa(), forged, "signature");
  ExpectRejected(Hs(), SignJwt(JWT_ALG_HS256, kSecret + "x", Claims("a", "", good_)), "signature");
}

TEST_F(JwtTest, RefusesAlgNoneAndAlgorithmConfusion) {
  ExpectRejected(Rsa(), test::UnsignedJwt(Claims("a", "admin", good_)), "none");
  ExpectRejected(Hs(), test::UnsignedJwt(Claims("a", "admin", good_)), "none");
  // HS256 "signed" with the RSA public key as the secret: the key is public, so anyone could.
  std::string confused = SignJwt(JWT_ALG_HS256, rsa_->public_pem, Claims("a", "admin", good_));
  ExpectRejected(Rsa(), confused, "HS256 is not accepted");
  // With an HS secret configured too, the token is checked against that secret only.
  ExpectRejected(JwtKeys::FromMaterial(kSecret, rsa_->public_pem, true), confused, "signature");
  // An RS256 token against an EC key, an ES256 token against an RSA key.
  ExpectRejected(Ec(), SignJwt(JWT_ALG_RS256, rsa_->private_pem, Claims("a", "", good_)),
                 "RS256 is not accepted");
  ExpectRejected(Rsa(), SignJwt(JWT_ALG_ES256, ec_->private_pem, Claims("a", "", good_)),
                 "ES256 is not accepted");
}

TEST_F(JwtTest, RefusesMalformedTokens) {
  const std::vector<std::string> bad = {"",
                                        "abc",
                                        "a.b",
                                        "a.b.c.d",
                                        "....",
                                        "!!!.@@@.###",
                                        std::string(9000, 'a') + ".b.c",
                                        std::string("a.b\0.c", 6)};
  for (const std::string& token : bad) {
    auto p = Verify(Rsa(), token);
    ASSERT_FALSE(p.ok()) << token;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  }
}

TEST(JwtKeysTest, LoadNamesTheFlagAndRefusesWeakSecrets) {
  auto dir = std::filesystem::temp_directory_path() / ("jwtkeys-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "short") << "too-short\n";
  std::ofstream(dir / "notpem") << "hello";
  auto weak = JwtKeys::Load({.hs_secret_file = (dir / "short").string()});
  ASSERT_FALSE(weak.ok());
  EXPECT_NE(std::string(weak.status().message()).find("--auth-jwt-hs-secret-file"),
            std::string::npos);
  EXPECT_EQ(std::string(weak.status().message()).find("too-short"), std::string::npos);
  auto notpem = JwtKeys::Load({.public_key_file = (dir / "notpem").string()});
  ASSERT_FALSE(notpem.ok());
  EXPECT_NE(std::string(notpem.status().message()).find("no PEM public key"), std::string::npos);
  auto missing = JwtKeys::Load({.public_key_file = (dir / "missing").string()});
  EXPECT_FALSE(missing.ok());
  std::filesystem::remove_all(dir);
}

TEST(StaticTokensTest, ParsesTokensAndIdentitiesAndNamesTheBadLine) {
  auto tokens = StaticTokens::Parse(
      "# comment\n\n  token-aaaaaaaaaaaaaaaa  checkout  stock:read stock:reserve\n"
      "mtls:spiffe://feed/client  warehouse stock:adjust\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto p = tokens->FindToken("token-aaaaaaaaaaaaaaaa");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->subject, "checkout");
  EXPECT_TRUE(p->HasScope("stock:reserve"));
  EXPECT_FALSE(p->HasScope("stock:adjust"));
  EXPECT_EQ(tokens->FindToken("token-aaaaaaaaaaaaaaab"), nullptr);
  ASSERT_NE(tokens->FindIdentity("spiffe://feed/client"), nullptr);
  EXPECT_EQ(tokens->FindIdentity("spiffe://feed/client")->subject, "warehouse");

  for (auto [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"secret-token-123456789 subject", "line 1: expected"},
           {"\nsecret-token-123456789 subject stock:write", "line 2: unknown scope 'stock:write'"},
           {"short subject stock:read", "line 1: token shorter than 16"},
           {"secret-token-123456789 a stock:read\nsecret-token-123456789 b stock:read",
            "line 2: token listed twice"}}) {
    auto bad = StaticTokens::Parse(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(std::string(bad.status().message()).find(want), std::string::npos) << bad.status();
    EXPECT_EQ(std::string(bad.status().message()).find("secret-token"), std::string::npos);
  }
}

// Every served method declares a known scope, and the table holds every method: a method
// added to a proto without (feed.auth.v1.required_scope) fails here and at server start.
TEST(ScopeTableTest, EveryServedMethodHasItsScope) {
  auto table = ScopeTable::FromServices(server::kServedServices);
  ASSERT_TRUE(table.ok()) << table.status();
  size_t methods = 0;
  for (const auto& name : server::kServedServices) {
    const auto* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i) {
      ++methods;
      std::string full = service->full_name() + "/" + service->method(i)->name();
      const std::string* scope = table->Find(full);
      ASSERT_NE(scope, nullptr) << full;
      EXPECT_NE(std::find(kKnownScopes.begin(), kKnownScopes.end(), *scope), kKnownScopes.end());
    }
  }
  EXPECT_EQ(table->entries().size(), methods);
  const std::map<std::string, std::string> expected = {
      {"inventory.v1.InventoryService/GetStock", "stock:read"},
      {"inventory.v1.InventoryService/WatchStock", "stock:read"},
      {"inventory.v1.InventoryService/GetReservation", "stock:read"},
      {"inventory.v1.InventoryService/GetShardMap", "stock:read"},
      {"inventory.v1.InventoryService/Reserve", "stock:reserve"},
      {"inventory.v1.InventoryService/Commit", "stock:reserve"},
      {"inventory.v1.InventoryService/Release", "stock:reserve"},
      {"inventory.v1.InventoryService/Feed", "stock:reserve"},
      {"inventory.v1.InventoryService/AdjustStock", "stock:adjust"},
      {"inventory.v1.InventoryService/BatchAdjustStock", "stock:adjust"},
      {"order.v1.OrderService/CreateOrder", "orders:write"},
      {"order.v1.OrderService/PayOrder", "orders:write"},
      {"order.v1.OrderService/AdvanceOrder", "orders:write"},
      {"order.v1.OrderService/CancelOrder", "orders:write"},
      {"order.v1.OrderService/GetOrder", "orders:read"},
      {"order.v1.OrderService/StreamOrderUpdates", "orders:read"},
      {"admin.v1.AdminService/CheckStore", "admin"},
      {"admin.v1.AdminService/Backup", "admin"},
      {"admin.v1.AdminService/Replay", "admin"}};
  for (const auto& [method, scope] : expected) {
    ASSERT_NE(table->Find(method), nullptr) << method;
    EXPECT_EQ(*table->Find(method), scope) << method;
  }
  EXPECT_EQ(table->entries().size(), expected.size()) << "a new method: add it to this table";
  auto unknown = ScopeTable::FromServices({"no.such.Service"});
  EXPECT_FALSE(unknown.ok());
}

class AuthorizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("authz-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    WriteTokens(
        "reader-token-0123456789 dashboard stock:read\n"
        "mtls:spiffe://feed/client scanner stock:read stock:adjust\n");
    std::ofstream(dir_ / "secret") << kSecret << "\n";
    options_.token_file = (dir_ / "tokens").string();
    options_.jwt.hs_secret_file = (dir_ / "secret").string();
    options_.reload_interval_ms = 50;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void WriteTokens(const std::string& text) {
    auto tmp = dir_ / "tokens.tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, dir_ / "tokens");
  }
  std::unique_ptr<Authorizer> Make() {
    auto table = ScopeTable::FromServices(server::kServedServices);
    auto a = Authorizer::Create(options_, std::move(*table));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? std::move(*a) : nullptr;
  }
  static constexpr const char* kAdjust = "inventory.v1.InventoryService/AdjustStock";
  static constexpr const char* kGetStock = "inventory.v1.InventoryService/GetStock";
  std::filesystem::path dir_;
  AuthOptions options_;
};

TEST_F(AuthorizerTest, StatusesAndChallenges) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  Decision none = a->Authorize(kGetStock, "", "");
  EXPECT_EQ(none.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(none.challenge, R"(Bearer realm="feed-server")");

  Decision basic = a->Authorize(kGetStock, "Basic dXNlcjpwYXNz", "");
  EXPECT_EQ(basic.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(basic.challenge.find(R"(error="invalid_request")"), std::string::npos);

  Decision bad = a->Authorize(kGetStock, "Bearer not-a-known-token-at-all", "");
  EXPECT_EQ(bad.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(bad.challenge.find(R"(error="invalid_token")"), std::string::npos);
  EXPECT_EQ(std::string(bad.status.message()).find("not-a-known-token"), std::string::npos);

  Decision reader = a->Authorize(kGetStock, "Bearer reader-token-0123456789", "");
  ASSERT_TRUE(reader.status.ok()) << reader.status;
  EXPECT_EQ(reader.principal->subject, "dashboard");

  Decision denied = a->Authorize(kAdjust, "bearer reader-token-0123456789", "");
  EXPECT_EQ(denied.status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(std::string(denied.status.message()).find("requires scope 'stock:adjust'"),
            std::string::npos)
      << denied.status;
  EXPECT_EQ(std::string(denied.status.message()).find("reader-token"), std::string::npos);
  EXPECT_NE(denied.challenge.find(R"(error="insufficient_scope", scope="stock:adjust")"),
            std::string::npos);

  std::string jwt = SignJwt(JWT_ALG_HS256, kSecret, Claims("ops", "stock:adjust"));
  Decision ops = a->Authorize(kAdjust, "Bearer " + jwt, "");
  ASSERT_TRUE(ops.status.ok()) << ops.status;
  EXPECT_EQ(ops.principal->subject, "ops");
  // Cached: the same answer again.
  EXPECT_TRUE(a->Authorize(kAdjust, "Bearer " + jwt, "").status.ok());

  // A client certificate known to the token file, without a token.
  Decision scanner = a->Authorize(kAdjust, "", "spiffe://feed/client");
  ASSERT_TRUE(scanner.status.ok()) << scanner.status;
  EXPECT_EQ(scanner.principal->subject, "scanner");
  EXPECT_EQ(a->Authorize(kAdjust, "", "spiffe://other").status.code(),
            absl::StatusCode::kUnauthenticated);
  // A method that is not served has no scope: never allowed.
  EXPECT_EQ(a->Authorize("x.Y/Z", "Bearer reader-token-0123456789", "").status.code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AuthorizerTest, ReloadsTheTokenFileAndKeepsItWhenBroken) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  const std::string fresh = "Bearer fresh-token-0123456789";
  EXPECT_FALSE(a->Authorize(kGetStock, fresh, "").status.ok());
  WriteTokens("fresh-token-0123456789 newcomer stock:read\n");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!a->Authorize(kGetStock, fresh, "").status.ok() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(a->Authorize(kGetStock, fresh, "").status.ok());
  EXPECT_FALSE(a->Authorize(kGetStock, "Bearer reader-token-0123456789", "").status.ok());
  // A broken file: the previous tokens stay.
  WriteTokens("fresh-token-0123456789 newcomer no:such:scope\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(a->Authorize(kGetStock, fresh, "").status.ok());
}

TEST_F(AuthorizerTest, RateLimitPerSubject) {
  options_.rate_limit = 1;
  options_.rate_burst = 3;
  auto a = Make();
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(a->Authorize(kGetStock, "Bearer reader-token-0123456789", "").status.ok()) << i;
  }
  Decision limited = a->Authorize(kGetStock, "Bearer reader-token-0123456789", "");
  EXPECT_EQ(limited.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_GE(limited.retry_after_s, 1);
  EXPECT_NE(std::string(limited.status.message()).find("'dashboard'"), std::string::npos);
  // Another subject has its own bucket.
  EXPECT_TRUE(a->Authorize(kGetStock, "", "spiffe://feed/client").status.ok());
  EXPECT_EQ(a->Charge("dashboard").code(), absl::StatusCode::kResourceExhausted);
}

TEST(RateLimiterTest, RefillsAtTheRate) {
  RateLimiter limiter(10, 2);
  auto t = RateLimiter::Clock::now();
  double retry = 0;
  EXPECT_TRUE(limiter.Allow("s", t, &retry));
  EXPECT_TRUE(limiter.Allow("s", t, &retry));
  EXPECT_FALSE(limiter.Allow("s", t, &retry));
  EXPECT_NEAR(retry, 0.1, 1e-6);
  EXPECT_TRUE(limiter.Allow("s", t + std::chrono::milliseconds(100), &retry));
  EXPECT_FALSE(limiter.Allow("s", t + std::chrono::milliseconds(100), &retry));
}

TEST(AuthorizerOffTest, AllowsEveryCallAsTheCertificateIdentity) {
  auto table = ScopeTable::FromServices(server::kServedServices);
  auto a = Authorizer::Create(AuthOptions{}, std::move(*table));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE((*a)->enabled());
  Decision d = (*a)->Authorize("inventory.v1.InventoryService/AdjustStock", "", "spiffe://x");
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.principal->subject, "spiffe://x");
}

}  // namespace
}  // namespace feed::security

#include "security/authorizer.h"

#include <chrono>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/file_watcher.h"
#include "common/module_logger.h"
#include "fmt/format.h"
#include "security/flag_file.h"
#include "security/jwt_verifier.h"
#include "security/rate_limiter.h"
#include "security/static_tokens.h"

namespace feed::security {
namespace {

constexpr std::string_view kRealm = R"(Bearer realm="feed-server")";
// Verified JWTs kept so that a client reusing its token is not verified again on every
// call (an RS256 check costs tens of microseconds); cleared when full or when keys change.
constexpr size_t kVerifiedCacheSize = 10000;

std::shared_ptr<spdlog::logger> Log() { return ModuleLogger("security"); }

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<StaticTokens> LoadTokens(const std::string& path) {
  auto text = ReadFlagFile(path, "--auth-token-file");
  if (!text.ok()) return text.status();
  auto tokens = StaticTokens::Parse(*text);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("--auth-token-file '{}': {}", path, std::string(tokens.status().message())));
  }
  return tokens;
}

Decision Deny(absl::Status status, std::string challenge) {
  Decision d;
  d.status = std::move(status);
  d.challenge = std::move(challenge);
  return d;
}

Decision Unauthenticated(std::string_view why, std::string_view error) {
  return Deny(
      absl::UnauthenticatedError(std::string(why)),
      error.empty() ? std::string(kRealm) : fmt::format(R"({}, error="{}")", kRealm, error));
}

class AuthorizerImpl final : public Authorizer {
 public:
  AuthorizerImpl(const AuthOptions& options, ScopeTable scopes)
      : options_(options),
        scopes_(std::move(scopes)),
        limiter_(options.rate_limit > 0
                     ? std::make_unique<RateLimiter>(options.rate_limit, options.rate_burst)
                     : nullptr),
        watcher_(std::chrono::milliseconds(std::max<int64_t>(options.reload_interval_ms, 50))) {}

  absl::Status Load() {
    if (options_.jwt.enabled()) {
      auto keys = JwtKeys::Load(options_.jwt);
      if (!keys.ok()) return keys.status();
      keys_ = std::move(*keys);
      keys_in_cache_ = keys_;
      watcher_.Watch({options_.jwt.hs_secret_file, options_.jwt.public_key_file},
                     [this] { ReloadKeys(); });
    }
    if (!options_.token_file.empty()) {
      auto tokens = LoadTokens(options_.token_file);
      if (!tokens.ok()) return tokens.status();
      tokens_ = std::make_shared<const StaticTokens>(std::move(*tokens));
      watcher_.Watch({options_.token_file}, [this] { ReloadTokens(); });
    }
    watcher_.Start();
    return absl::OkStatus();
  }

  Decision Authorize(std::string_view method, std::string_view authorization,
                     std::string_view tls_identity) const override {
    if (!options_.enabled()) {
      static const auto anonymous = std::make_shared<const Principal>();
      Decision d;
      if (tls_identity.empty()) {
        d.principal = anonymous;
      } else {
        auto p = std::make_shared<Principal>();
        p->subject = std::string(tls_identity);
        p->tls_identity = std::string(tls_identity);
        p->method = "mtls";
        d.principal = std::move(p);
      }
      return Limit(std::move(d));
    }
    const std::string* scope = scopes_.Find(method);
    if (scope == nullptr) {
      // Only served methods reach here; one without a scope is refused, never let through.
      return Deny(absl::PermissionDeniedError(fmt::format("{} has no declared scope", method)),
                  std::string(kRealm));
    }
    absl::StatusOr<std::shared_ptr<const Principal>> who =
        Authenticate(authorization, tls_identity);
    if (!who.ok()) {
      const bool malformed = who.status().code() == absl::StatusCode::kInvalidArgument;
      return Unauthenticated(std::string(who.status().message()), malformed ? "invalid_request"
                                                                  : authorization.empty()
                                                                      ? ""
                                                                      : "invalid_token");
    }
    const Principal& p = **who;
    if (!p.HasScope(*scope)) {
      return Deny(absl::PermissionDeniedError(fmt::format(
                      "{} requires scope '{}'; subject '{}' has {}", method, *scope, p.subject,
                      p.scopes.empty() ? "none" : absl::StrJoin(p.scopes, " "))),
                  fmt::format(R"({}, error="insufficient_scope", scope="{}")", kRealm, *scope));
    }
    Decision d;
    if (!tls_identity.empty() && p.tls_identity != tls_identity) {
      auto with_identity = std::make_shared<Principal>(p);
      with_identity->tls_identity = std::string(tls_identity);
      d.principal = std::move(with_identity);
    } else {
      d.principal = std::move(*who);
    }
    return Limit(std::move(d));
  }

  absl::Status Charge(std::string_view subject) const override {
    if (!limiter_ || subject.empty()) return absl::OkStatus();
    return Limited(subject).status;
  }

  bool enabled() const override { return options_.enabled(); }
  const ScopeTable& scopes() const override { return scopes_; }

 private:
  // UNAUTHENTICATED (or INVALID_ARGUMENT for a malformed header) with the reason.
  absl::StatusOr<std::shared_ptr<const Principal>> Authenticate(
      std::string_view authorization, std::string_view tls_identity) const {
    if (authorization.empty()) {
      if (!tls_identity.empty()) {
        if (auto tokens = Tokens()) {
          if (auto p = tokens->FindIdentity(tls_identity)) return p;
        }
      }
      return absl::UnauthenticatedError(
          "missing credentials: send the header 'authorization: Bearer <token>'");
    }
    std::string_view token = authorization;
    if (token.size() < 7 || !absl::EqualsIgnoreCase(std::string(token.substr(0, 7)), "Bearer ")) {
      return absl::InvalidArgumentError(
          "authorization header: expected 'Bearer <token>' (the bearer scheme)");
    }
    token = token.substr(7);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
      token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
    if (token.empty()) {
      return absl::InvalidArgumentError("authorization header: the bearer token is empty");
    }
    if (auto tokens = Tokens()) {
      if (auto p = tokens->FindToken(token)) return p;
    }
    std::shared_ptr<const JwtKeys> keys = Keys();
    if (keys == nullptr) return absl::UnauthenticatedError("invalid token: not a known token");
    const int64_t now = NowSeconds();
    {
      std::lock_guard lock(cache_mu_);
      if (auto it = verified_.find(absl::string_view(token.data(), token.size()));
          it != verified_.end()) {
        if (it->second->expires_at_s > now) return it->second;
        verified_.erase(it);
      }
    }
    absl::StatusOr<Principal> verified = VerifyJwt(*keys, options_.jwt, token, now);
    if (!verified.ok()) return verified.status();
    auto p = std::make_shared<const Principal>(std::move(*verified));
    std::lock_guard lock(cache_mu_);
    if (keys == keys_in_cache_) {
      if (verified_.size() >= kVerifiedCacheSize) verified_.clear();
      verified_.emplace(std::string(token), p);
    }
    return p;
  }

  Decision Limit(Decision d) const {
    if (!limiter_ || d.principal->subject.empty()) return d;
    Decision limited = Limited(d.principal->subject);
    return limited.status.ok() ? d : limited;
  }
  // The rate limit's verdict for one more request by `subject`.
  Decision Limited(std::string_view subject) const {
    Decision d;
    double retry = 0;
    if (limiter_->Allow(subject, RateLimiter::Clock::now(), &retry)) return d;
    d.retry_after_s = std::max<int64_t>(1, static_cast<int64_t>(retry + 0.999));
    d.status = absl::ResourceExhaustedError(fmt::format(
        "subject '{}' is over its rate limit ({} requests/s, burst {}: --auth-rate-limit); retry "
        "in {:.2f} s",
        subject, limiter_->rate(), limiter_->burst(), retry));
    return d;
  }

  std::shared_ptr<const JwtKeys> Keys() const {
    std::lock_guard lock(mu_);
    return keys_;
  }
  std::shared_ptr<const StaticTokens> Tokens() const {
    std::lock_guard lock(mu_);
    return tokens_;
  }

  void ReloadKeys() {
    auto keys = JwtKeys::Load(options_.jwt);
    if (!keys.ok()) {
      Log()->error("JWT keys changed on disk but do not load ({}); keeping the previous keys",
                   std::string(keys.status().message()));
      return;
    }
    {
      std::lock_guard lock(mu_);
      keys_ = *keys;
    }
    std::lock_guard lock(cache_mu_);
    verified_.clear();
    keys_in_cache_ = *keys;
    Log()->info("JWT keys reloaded");
  }

  void ReloadTokens() {
    auto tokens = LoadTokens(options_.token_file);
    if (!tokens.ok()) {
      Log()->error("{}; keeping the previous tokens", std::string(tokens.status().message()));
      return;
    }
    size_t n = tokens->size();
    {
      std::lock_guard lock(mu_);
      tokens_ = std::make_shared<const StaticTokens>(std::move(*tokens));
    }
    Log()->info("token file reloaded: {} entries", n);
  }

  const AuthOptions options_;
  const ScopeTable scopes_;
  const std::unique_ptr<RateLimiter> limiter_;
  mutable std::mutex mu_;
  std::shared_ptr<const JwtKeys> keys_;
  std::shared_ptr<const StaticTokens> tokens_;
  mutable std::mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::shared_ptr<const Principal>> verified_;
  // The keys the cached tokens were verified with: a verification that raced a reload
  // is not cached.
  mutable std::shared_ptr<const JwtKeys> keys_in_cache_;
  FileWatcher watcher_;  // last: its thread stops before the rest is destroyed
};

}  // namespace

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Create(const AuthOptions& options,
                                                               ScopeTable scopes) {
  if (options.rate_limit < 0 || options.rate_burst < 0) {
    return absl::InvalidArgumentError("--auth-rate-limit and --auth-rate-burst must be >= 0");
  }
  auto authorizer = std::make_unique<AuthorizerImpl>(options, std::move(scopes));
  if (absl::Status s = authorizer->Load(); !s.ok()) return s;
  return std::unique_ptr<Authorizer>(std::move(authorizer));
}

}  // namespace feed::security

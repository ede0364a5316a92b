#include "kafka_security.h"

#include <librdkafka/rdkafka.h>

#include "fmt/format.h"
#include "logging.h"

namespace feed::bridge::internal {
namespace {

// The librdkafka settings the security fields own: kafka_properties may not set them too.
constexpr std::string_view kSecurityOwned[] = {
    "security.protocol", "ssl.ca.location", "ssl.ca.pem",    "sasl.mechanism",
    "sasl.mechanisms",   "sasl.username",   "sasl.password",
};

}  // namespace

absl::Status ValidateKafkaSecurity(const KafkaSecurity& s,
                                   const std::map<std::string, std::string>& kafka_properties,
                                   std::string_view who) {
  auto bad = [who](std::string m) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", who, m));
  };
  if (s.protocol != "plaintext" && !s.tls()) {
    return bad(
        fmt::format("security_protocol must be plaintext, ssl or sasl_ssl, got '{}'", s.protocol));
  }
  if (!s.tls() && !s.ssl_ca_file.empty()) {
    return bad("ssl_ca_file needs security_protocol ssl or sasl_ssl");
  }
  const bool has_password = !s.sasl_password_file.empty() || !s.sasl_password.empty();
  if (s.sasl()) {
    if (s.sasl_mechanism != "SCRAM-SHA-512" && s.sasl_mechanism != "SCRAM-SHA-256" &&
        s.sasl_mechanism != "PLAIN") {
      return bad(
          fmt::format("sasl_mechanism must be SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN, got '{}'",
                      s.sasl_mechanism));
    }
    if (s.sasl_username.empty()) return bad("security_protocol sasl_ssl needs sasl_username");
    if (!has_password) {
      return bad(
          "security_protocol sasl_ssl needs a password (sasl_password_file or "
          "sasl_password)");
    }
  } else if (!s.sasl_username.empty() || has_password) {
    return bad("sasl_username and the password need security_protocol sasl_ssl");
  }
  if (s.tls()) {
    for (std::string_view key : kSecurityOwned) {
      if (kafka_properties.count(std::string(key)) > 0) {
        return bad(
            fmt::format("kafka_properties sets {}, which security_protocol {} sets; remove one",
                        key, s.protocol));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> SecurityProperties(const KafkaSecurity& s) {
  std::vector<std::pair<std::string, std::string>> props;
  if (s.tls()) {
    props.emplace_back("security.protocol", s.protocol);
    if (!s.ssl_ca_file.empty()) props.emplace_back("ssl.ca.location", s.ssl_ca_file);
  }
  if (s.sasl()) {
    props.emplace_back("sasl.mechanisms", s.sasl_mechanism);
    props.emplace_back("sasl.username", s.sasl_username);
  }
  return props;
}

std::string DescribeKafkaSecurity(const KafkaSecurity& s,
                                  const std::map<std::string, std::string>& kafka_properties) {
  const std::string ca = s.ssl_ca_file.empty() ? "" : ", CA " + s.ssl_ca_file;
  if (s.sasl())
    return fmt::format("sasl_ssl, {} as user '{}'{}", s.sasl_mechanism, s.sasl_username, ca);
  if (s.tls()) return "ssl" + ca;
  auto it = kafka_properties.find("security.protocol");
  return it != kafka_properties.end() ? it->second : "plaintext";
}

bool SecretKafkaProperty(std::string_view key) {
  return key.find("password") != std::string_view::npos ||
         key.find("secret") != std::string_view::npos || key == "ssl.key.pem" ||
         key == "sasl.oauthbearer.config";
}

absl::Status ConfigureClient(rd_kafka_conf_s* conf,
                             std::vector<std::pair<std::string, std::string>> props,
                             const KafkaSecurity& security,
                             const std::map<std::string, std::string>& kafka_properties,
                             const SaslPassword& password, std::string_view who) {
  for (auto& kv : SecurityProperties(security)) props.push_back(std::move(kv));
  for (const auto& [k, v] : kafka_properties) props.emplace_back(k, v);
  char err[512];
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      return absl::InvalidArgumentError(
          fmt::format("{}: kafka property {}: {}", who, k,
                      SecretKafkaProperty(k) ? "[redacted]" : std::string(err)));
    }
  }
  return password.Configure(conf);
}

SaslPassword::SaslPassword(const KafkaSecurity& security, std::chrono::milliseconds check_interval,
                           std::string who)
    : username_(security.sasl_username),
      who_(std::move(who)),
      check_interval_(check_interval),
      next_check_(std::chrono::steady_clock::now() + check_interval) {}

SaslPassword::~SaslPassword() { WipeSecret(password_); }

absl::StatusOr<std::unique_ptr<SaslPassword>> SaslPassword::Open(
    const KafkaSecurity& security, const std::map<std::string, std::string>& kafka_properties,
    std::chrono::milliseconds check_interval, std::string_view who) {
  if (absl::Status s = ValidateKafkaSecurity(security, kafka_properties, who); !s.ok()) return s;
  std::unique_ptr<SaslPassword> p(new SaslPassword(security, check_interval, std::string(who)));
  if (!security.sasl()) return p;
  if (security.sasl_password_file.empty()) {
    p->password_ = security.sasl_password;
    return p;
  }
  p->file_ = std::make_unique<WatchedFile>(security.sasl_password_file, /*password=*/true);
  if (absl::Status s = p->file_->Load(); !s.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: SASL password file: {}", who, std::string(s.message())));
  }
  p->password_ = p->file_->content();
  return p;
}

absl::Status SaslPassword::Configure(rd_kafka_conf_s* conf) const {
  if (password_.empty()) return absl::OkStatus();
  char err[512];
  if (rd_kafka_conf_set(conf, "sasl.password", password_.c_str(), err, sizeof err) !=
      RD_KAFKA_CONF_OK) {
    return absl::InvalidArgumentError(
        fmt::format("{}: kafka property sasl.password: {}", who_, Redact(err, password_)));
  }
  return absl::OkStatus();
}

bool SaslPassword::Refresh(rd_kafka_s* rk) {
  if (file_ == nullptr) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return false;
  next_check_ = now + check_interval_;
  std::string error;
  switch (file_->Check(&error)) {
    case WatchedFile::Poll::kUnchanged:
      return false;
    case WatchedFile::Poll::kUnreadable:
      if (!unreadable_) BridgeLogger()->warn("{}: {}; the password in use stays", who_, error);
      unreadable_ = true;
      return false;
    case WatchedFile::Poll::kChanged:
      break;
  }
  unreadable_ = false;
  WipeSecret(password_);
  password_ = file_->content();
  if (rd_kafka_error_t* e =
          rd_kafka_sasl_set_credentials(rk, username_.c_str(), password_.c_str())) {
    BridgeLogger()->warn("{}: the new SASL password was refused: {}", who_,
                         Redact(rd_kafka_error_string(e), password_));
    rd_kafka_error_destroy(e);
    return false;
  }
  BridgeLogger()->info("{}: the SASL password file {} changed; new connections log in with it",
                       who_, file_->path());
  return true;
}

}  // namespace feed::bridge::internal

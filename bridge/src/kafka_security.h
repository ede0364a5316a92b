// What KafkaSecurity means to librdkafka, for every client of the bridge: its validation, the
// properties it sets, and the SASL password kept current from its file.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bridge/kafka_security.h"
#include "watched_file.h"

struct rd_kafka_s;
struct rd_kafka_conf_s;

namespace feed::bridge::internal {

// INVALID_ARGUMENT naming `who` and the field at fault: an unknown protocol or mechanism, SASL
// fields without sasl_ssl, sasl_ssl without a user or a password, a CA file without TLS, or
// `kafka_properties` setting what the security fields set.
absl::Status ValidateKafkaSecurity(const KafkaSecurity& security,
                                   const std::map<std::string, std::string>& kafka_properties,
                                   std::string_view who);

// The librdkafka properties `security` sets, the password aside (it never travels in a list
// that could be logged).
std::vector<std::pair<std::string, std::string>> SecurityProperties(const KafkaSecurity& security);

// How the client connects, for the start-up log line: "sasl_ssl, SCRAM-SHA-512 as user 'u', CA
// ca.pem", "ssl", or kafka_properties' security.protocol, else "plaintext".
std::string DescribeKafkaSecurity(const KafkaSecurity& security,
                                  const std::map<std::string, std::string>& kafka_properties);

// librdkafka settings whose values are secrets: never in an error message.
bool SecretKafkaProperty(std::string_view key);

class SaslPassword;

// Sets `props` (the client's defaults), then `security`'s properties, then `kafka_properties`
// (which override the defaults) and the password on `conf`. INVALID_ARGUMENT naming `who` and
// the property librdkafka refused, never a secret's value.
absl::Status ConfigureClient(rd_kafka_conf_s* conf,
                             std::vector<std::pair<std::string, std::string>> props,
                             const KafkaSecurity& security,
                             const std::map<std::string, std::string>& kafka_properties,
                             const SaslPassword& password, std::string_view who);

// The SASL password of long-lived clients that cannot be replaced on a change (the shard log's):
// read at Open, then looked at every `check_interval` by Refresh, which hands a changed password
// to a client with rd_kafka_sasl_set_credentials (used from its next connection). Without
// sasl_ssl it holds nothing and does nothing. Not thread-safe: one per client thread.
class SaslPassword {
 public:
  // Validates `security` with `kafka_properties` (ValidateKafkaSecurity) and reads the password.
  static absl::StatusOr<std::unique_ptr<SaslPassword>> Open(
      const KafkaSecurity& security, const std::map<std::string, std::string>& kafka_properties,
      std::chrono::milliseconds check_interval, std::string_view who);
  ~SaslPassword();

  // Sets sasl.password on a configuration being built.
  absl::Status Configure(rd_kafka_conf_s* conf) const;
  // When the file changed: the new password for `rk`. Returns whether it changed.
  bool Refresh(rd_kafka_s* rk);

 private:
  SaslPassword(const KafkaSecurity& security, std::chrono::milliseconds check_interval,
               std::string who);

  std::string username_;
  std::string who_;
  std::chrono::milliseconds check_interval_;
  std::chrono::steady_clock::time_point next_check_;
  std::unique_ptr<WatchedFile> file_;  // null: the password came without a file (or no SASL)
  std::string password_;
  bool unreadable_ = false;  // the last check could not read the file (warned once)
};

}  // namespace feed::bridge::internal

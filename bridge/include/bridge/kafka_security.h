// Transport security of the Kafka clients (bridge/README.md, "Security"): the relay's producer
// and, in cluster mode, the shard log's producer, readers and group member take the same
// settings.
#pragma once

#include <string>

namespace feed::bridge {

struct KafkaSecurity {
  // "plaintext": nothing is set, librdkafka's defaults and kafka_properties rule; "ssl": TLS;
  // "sasl_ssl": TLS and a SASL login.
  std::string protocol = "plaintext";
  // PEM file of the CAs that sign the brokers' certificates (ssl.ca.location); empty: the
  // system's.
  std::string ssl_ca_file;
  std::string sasl_mechanism = "SCRAM-SHA-512";  // SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN
  std::string sasl_username;
  // The password is the content of this file without its trailing newline, re-read when it
  // changes on disk. Without a file, sasl_password (e.g. taken from the environment by the
  // application). Neither is ever logged.
  std::string sasl_password_file;
  std::string sasl_password;

  bool sasl() const { return protocol == "sasl_ssl"; }
  bool tls() const { return sasl() || protocol == "ssl"; }
};

}  // namespace feed::bridge

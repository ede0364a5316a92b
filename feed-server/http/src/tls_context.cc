#include "tls_context.h"

#include <openssl/ssl.h>

#include "fmt/format.h"
#include "server/logging.h"

namespace feed::http {

namespace ssl = boost::asio::ssl;

TlsContextSource::TlsContextSource(const security::TlsOptions& options)
    : options_(options), watcher_(std::chrono::milliseconds(options.reload_interval_ms)) {}

absl::StatusOr<std::unique_ptr<TlsContextSource>> TlsContextSource::Create(
    const security::TlsOptions& options) {
  std::unique_ptr<TlsContextSource> source(new TlsContextSource(options));
  auto context = source->Build();
  if (!context.ok()) return context.status();
  source->current_ = std::move(*context);
  std::vector<std::string> files = {options.cert_file, options.key_file};
  if (options.mutual()) files.push_back(options.client_ca_file);
  source->watcher_.Watch(std::move(files), [s = source.get()] { s->Reload(); });
  source->watcher_.Start();
  return source;
}

std::shared_ptr<ssl::context> TlsContextSource::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

absl::StatusOr<std::shared_ptr<ssl::context>> TlsContextSource::Build() const {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  const char* step = "--tls-cert-file";
  try {
    context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                         ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                         ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    context->use_certificate_chain_file(options_.cert_file);
    step = "--tls-key-file";
    context->use_private_key_file(options_.key_file, ssl::context::pem);
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
      return absl::InvalidArgumentError(
          "--tls-key-file: the key does not match the certificate of --tls-cert-file");
    }
    if (options_.mutual()) {
      step = "--tls-client-ca-file";
      context->load_verify_file(options_.client_ca_file);
      context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
  } catch (const boost::system::system_error& e) {
    return absl::InvalidArgumentError(fmt::format("{}: cannot load: {}", step, e.what()));
  }
  return context;
}

void TlsContextSource::Reload() {
  auto context = Build();
  if (!context.ok()) {
    server::ServerLog()->error(
        "HTTP TLS: certificate files changed but do not load ({}); still serving the previous "
        "certificate",
        std::string(context.status().message()));
    return;
  }
  {
    std::lock_guard lock(mu_);
    current_ = std::move(*context);
  }
  server::ServerLog()->info("HTTP TLS: certificate reloaded from {}", options_.cert_file);
}

}  // namespace feed::http

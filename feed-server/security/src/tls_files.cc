#include "security/tls_files.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/module_logger.h"
#include "fmt/format.h"
#include "security/flag_file.h"

namespace feed::security {
namespace {

// The certificates of a PEM bundle (at least one), owned by the returned stack.
STACK_OF(X509) * ReadCertificates(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  STACK_OF(X509)* certs = sk_X509_new_null();
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    sk_X509_push(certs, cert);
  }
  ERR_clear_error();  // the read that ended the loop
  BIO_free(bio);
  return certs;
}

void WriteAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << data;
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

absl::Status ValidateTlsFiles(const TlsOptions& tls) {
  auto cert = ReadFlagFile(tls.cert_file, "--tls-cert-file");
  if (!cert.ok()) return cert.status();
  auto key = ReadFlagFile(tls.key_file, "--tls-key-file");
  if (!key.ok()) return key.status();
  STACK_OF(X509)* chain = ReadCertificates(*cert);
  const bool has_cert = sk_X509_num(chain) > 0;
  BIO* bio = BIO_new_mem_buf(key->data(), static_cast<int>(key->size()));
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  const bool matches =
      has_cert && pkey != nullptr && X509_check_private_key(sk_X509_value(chain, 0), pkey) == 1;
  EVP_PKEY_free(pkey);
  sk_X509_pop_free(chain, X509_free);
  ERR_clear_error();
  if (!has_cert) {
    return absl::InvalidArgumentError(
        fmt::format("--tls-cert-file: '{}' holds no PEM certificate", tls.cert_file));
  }
  if (!matches) {
    return absl::InvalidArgumentError(fmt::format(
        "--tls-key-file: '{}' is not a PEM private key matching --tls-cert-file", tls.key_file));
  }
  if (tls.mutual()) {
    auto ca = ReadFlagFile(tls.client_ca_file, "--tls-client-ca-file");
    if (!ca.ok()) return ca.status();
    STACK_OF(X509)* cas = ReadCertificates(*ca);
    const bool any = sk_X509_num(cas) > 0;
    sk_X509_pop_free(cas, X509_free);
    if (!any) {
      return absl::InvalidArgumentError(
          fmt::format("--tls-client-ca-file: '{}' holds no PEM certificate", tls.client_ca_file));
    }
  }
  return absl::OkStatus();
}

StagedTlsFiles::StagedTlsFiles(const TlsOptions& tls, std::string dir)
    : original_(tls),
      dir_(std::move(dir)),
      staged_(tls),
      watcher_(std::chrono::milliseconds(tls.reload_interval_ms)) {
  staged_.cert_file = dir_ + "/cert.pem";
  staged_.key_file = dir_ + "/key.pem";
  if (tls.mutual()) staged_.client_ca_file = dir_ + "/client-ca.pem";
}

StagedTlsFiles::~StagedTlsFiles() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::StatusOr<std::unique_ptr<StagedTlsFiles>> StagedTlsFiles::Create(const TlsOptions& tls) {
  if (absl::Status valid = ValidateTlsFiles(tls); !valid.ok()) return valid;
  std::string tmpl = (std::filesystem::temp_directory_path() / "feed-tls-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::UnavailableError("cannot create a private directory for the TLS files");
  }
  std::unique_ptr<StagedTlsFiles> files(new StagedTlsFiles(tls, tmpl));
  if (absl::Status copied = files->Copy(); !copied.ok()) return copied;
  std::vector<std::string> watched = {tls.cert_file, tls.key_file};
  if (tls.mutual()) watched.push_back(tls.client_ca_file);
  files->watcher_.Watch(std::move(watched), [f = files.get()] { f->Reload(); });
  files->watcher_.Start();
  return files;
}

absl::Status StagedTlsFiles::Copy() const {
  auto cert = ReadFlagFile(original_.cert_file, "--tls-cert-file");
  auto key = ReadFlagFile(original_.key_file, "--tls-key-file");
  if (!cert.ok()) return cert.status();
  if (!key.ok()) return key.status();
  std::string ca;
  if (original_.mutual()) {
    auto read = ReadFlagFile(original_.client_ca_file, "--tls-client-ca-file");
    if (!read.ok()) return read.status();
    ca = std::move(*read);
  }
  try {
    WriteAtomically(staged_.key_file, *key);
    WriteAtomically(staged_.cert_file, *cert);
    if (original_.mutual()) WriteAtomically(staged_.client_ca_file, ca);
  } catch (const std::exception& e) {
    return absl::UnavailableError(fmt::format("cannot copy the TLS files: {}", e.what()));
  }
  return absl::OkStatus();
}

void StagedTlsFiles::Reload() const {
  absl::Status s = ValidateTlsFiles(original_);
  if (s.ok()) s = Copy();
  if (!s.ok()) {
    ModuleLogger("security")
        ->error(
            "gRPC TLS: certificate files changed but do not load ({}); still serving the previous "
            "certificate",
            std::string(s.message()));
    return;
  }
  ModuleLogger("security")->info("gRPC TLS: new certificate files validated; serving them");
}

}  // namespace feed::security

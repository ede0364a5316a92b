// The gateway's TLS context, built from the certificate, key and (mTLS) client CA files and
// rebuilt when they change: new connections get the new context, open ones keep theirs. A
// change that does not load (a half-written file, a key that does not match) keeps the
// previous context and logs why.
#pragma once

#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "boost/asio/ssl/context.hpp"
#include "common/file_watcher.h"
#include "security/options.h"

namespace feed::http {

class TlsContextSource {
 public:
  // INVALID_ARGUMENT naming the flag and the problem when the files do not load.
  static absl::StatusOr<std::unique_ptr<TlsContextSource>> Create(
      const security::TlsOptions& options);

  std::shared_ptr<boost::asio::ssl::context> Current() const;

 private:
  explicit TlsContextSource(const security::TlsOptions& options);
  absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> Build() const;
  void Reload();

  const security::TlsOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;
  FileWatcher watcher_;
};

}  // namespace feed::http

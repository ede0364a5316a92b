// Certificate files checked before a server uses them. gRPC's file watcher serves whatever
// is on disk, even a half-written or mismatched certificate; so gRPC watches a private copy
// that is only replaced once the operator's files are valid together (the chain and the CA
// bundle parse, the key matches the certificate). A change that does not validate keeps the
// previous copy, and the reason is logged.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_watcher.h"
#include "security/options.h"

namespace feed::security {

// OK when the files of `tls` can serve together; else INVALID_ARGUMENT naming the flag.
absl::Status ValidateTlsFiles(const TlsOptions& tls);

class StagedTlsFiles {
 public:
  // Validates the files, copies them into a new private directory and starts watching
  // the originals.
  static absl::StatusOr<std::unique_ptr<StagedTlsFiles>> Create(const TlsOptions& tls);
  ~StagedTlsFiles();  // removes the private copies

  // `tls` with the paths of the validated copies.
  const TlsOptions& staged() const { return staged_; }

 private:
  StagedTlsFiles(const TlsOptions& tls, std::string dir);
  absl::Status Copy() const;
  void Reload() const;

  const TlsOptions original_;
  const std::string dir_;
  TlsOptions staged_;
  FileWatcher watcher_;
};

}  // namespace feed::security

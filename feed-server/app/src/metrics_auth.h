// HTTP basic authentication of /metrics: `user:password` lines in a file (comments with #),
// reloaded when the file changes (a file that does not load keeps the previous users).
// Passwords are kept and compared as SHA-256 digests.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "common/file_watcher.h"

namespace feed::server {

class MetricsAuth {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsAuth>> Create(const std::string& file,
                                                             int64_t reload_interval_ms);
  bool Check(const std::string& user, const std::string& password) const;

 private:
  MetricsAuth(std::string file, int64_t reload_interval_ms);
  absl::StatusOr<std::map<std::string, std::string>> Load() const;

  const std::string file_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> users_;  // user -> SHA-256 of the password
  FileWatcher watcher_;
};

}  // namespace feed::server

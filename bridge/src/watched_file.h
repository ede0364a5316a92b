// Small files the relay re-reads when they change on disk: the SASL password file and the CA
// file. A change is a different stat (device, inode, size, mtime, ctime: an in-place rewrite
// as well as an atomic rename or a Kubernetes-style symlink swap) whose content differs from
// the content last accepted. Without librdkafka, so it is testable on its own.
//
// Not thread-safe: the relay thread owns them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace feed::bridge::internal {

class WatchedFile {
 public:
  // `password`: the content is a password (trailing CR/LF dropped, must not be empty).
  WatchedFile(std::string path, bool password);
  ~WatchedFile();
  WatchedFile(const WatchedFile&) = delete;
  WatchedFile& operator=(const WatchedFile&) = delete;

  // Reads the file now; on success its content becomes content().
  absl::Status Load();

  enum class Poll { kUnchanged, kChanged, kUnreadable };
  // Re-reads the file if its stat changed. kChanged: content() is the new content. kUnreadable:
  // the file is missing, unreadable or (a password) empty right now; content() stays as it
  // was and the next Check reads it again; *error says why (never the content).
  Poll Check(std::string* error);

  const std::string& path() const { return path_; }
  const std::string& content() const { return content_; }
  // World-readable (mode & 0004) when last read.
  bool world_readable() const { return world_readable_; }

 private:
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  absl::Status Read(std::string* content, Stamp* stamp, bool* world_readable) const;

  std::string path_;
  bool password_;
  std::string content_;
  Stamp stamp_;
  bool world_readable_ = false;
};

// Overwrites the bytes of a string holding a secret before it is freed or reused.
void WipeSecret(std::string& s);

// `text` with every occurrence of `secret` replaced by "[redacted]" (secrets shorter than 4
// characters are left alone: they would garble the text, and they are no secret anyway).
std::string Redact(std::string_view text, std::string_view secret);

}  // namespace feed::bridge::internal

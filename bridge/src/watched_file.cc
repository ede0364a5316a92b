#include "watched_file.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "fmt/format.h"

namespace feed::bridge::internal {
namespace {

// Larger files are refused: a CA bundle is a few hundred KiB, a password a few bytes.
constexpr off_t kMaxFileBytes = 16 << 20;
constexpr off_t kMaxPasswordBytes = 64 << 10;

int64_t Nanos(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

WatchedFile::WatchedFile(std::string path, bool password)
    : path_(std::move(path)), password_(password) {}

WatchedFile::~WatchedFile() {
  if (password_) WipeSecret(content_);
}

absl::Status WatchedFile::Read(std::string* content, Stamp* stamp, bool* world_readable) const {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(fmt::format("cannot open {}: {}", path_, strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return absl::InternalError(fmt::format("cannot stat {}: {}", path_, strerror(e)));
  }
  const off_t limit = password_ ? kMaxPasswordBytes : kMaxFileBytes;
  if (!S_ISREG(st.st_mode) || st.st_size > limit) {
    ::close(fd);
    return absl::InvalidArgumentError(
        fmt::format("{} is not a regular file of at most {} bytes", path_, limit));
  }
  std::string data;
  data.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // shorter than its stat said: rewritten meanwhile; the next check sees it
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(got);
  if (password_) {
    while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.pop_back();
    if (data.empty()) return absl::InvalidArgumentError(fmt::format("{} is empty", path_));
  }
  *content = std::move(data);
  *stamp = Stamp{.dev = st.st_dev,
                 .ino = st.st_ino,
                 .size = st.st_size,
                 .mtime_ns = Nanos(st.st_mtim),
                 .ctime_ns = Nanos(st.st_ctim)};
  *world_readable = (st.st_mode & S_IROTH) != 0;
  return absl::OkStatus();
}

absl::Status WatchedFile::Load() {
  std::string content;
  Stamp stamp;
  bool world_readable = false;
  absl::Status s = Read(&content, &stamp, &world_readable);
  if (!s.ok()) return s;
  if (password_) WipeSecret(content_);
  content_ = std::move(content);
  stamp_ = stamp;
  world_readable_ = world_readable;
  return absl::OkStatus();
}

WatchedFile::Poll WatchedFile::Check(std::string* error) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    *error = fmt::format("cannot stat {}: {}", path_, strerror(errno));
    return Poll::kUnreadable;
  }
  Stamp now{.dev = st.st_dev,
            .ino = st.st_ino,
            .size = st.st_size,
            .mtime_ns = Nanos(st.st_mtim),
            .ctime_ns = Nanos(st.st_ctim)};
  if (now == stamp_) return Poll::kUnchanged;
  std::string content;
  Stamp stamp;
  bool world_readable = false;
  absl::Status s = Read(&content, &stamp, &world_readable);
  if (!s.ok()) {
    *error = std::string(s.message());
    return Poll::kUnreadable;
  }
  stamp_ = stamp;
  world_readable_ = world_readable;
  if (content == content_) {
    if (password_) WipeSecret(content);
    return Poll::kUnchanged;
  }
  if (password_) WipeSecret(content_);
  content_ = std::move(content);
  return Poll::kChanged;
}

void WipeSecret(std::string& s) {
  if (!s.empty()) explicit_bzero(s.data(), s.size());
  s.clear();
}

std::string Redact(std::string_view text, std::string_view secret) {
  std::string out(text);
  if (secret.size() < 4) return out;
  for (size_t at = out.find(secret); at != std::string::npos;
       at = out.find(secret, at + sizeof("[redacted]") - 1)) {
    out.replace(at, secret.size(), "[redacted]");
  }
  return out;
}

}  // namespace feed::bridge::internal

#include "metrics_auth.h"

#include <openssl/crypto.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "security/flag_file.h"
#include "security/static_tokens.h"
#include "server/logging.h"

namespace feed::server {

MetricsAuth::MetricsAuth(std::string file, int64_t reload_interval_ms)
    : file_(std::move(file)), watcher_(std::chrono::milliseconds(reload_interval_ms)) {}

absl::StatusOr<std::unique_ptr<MetricsAuth>> MetricsAuth::Create(const std::string& file,
                                                                 int64_t reload_interval_ms) {
  std::unique_ptr<MetricsAuth> auth(new MetricsAuth(file, reload_interval_ms));
  auto users = auth->Load();
  if (!users.ok()) return users.status();
  auth->users_ = std::move(*users);
  auth->watcher_.Watch({file}, [a = auth.get()] {
    auto reloaded = a->Load();
    if (!reloaded.ok()) {
      ServerLog()->error("{}; keeping the previous metrics users",
                         std::string(reloaded.status().message()));
      return;
    }
    std::lock_guard lock(a->mu_);
    a->users_ = std::move(*reloaded);
    ServerLog()->info("metrics users reloaded from {}", a->file_);
  });
  auth->watcher_.Start();
  return auth;
}

absl::StatusOr<std::map<std::string, std::string>> MetricsAuth::Load() const {
  auto text = security::ReadFlagFile(file_, "--metrics-basic-auth-file");
  if (!text.ok()) return text.status();
  std::map<std::string, std::string> users;
  int number = 0;
  const std::string all = std::move(*text);
  for (absl::string_view raw : absl::StrSplit(all, '\n')) {
    ++number;
    std::string_view line(raw.data(), raw.size());
    while (!line.empty() && absl::ascii_isspace(static_cast<unsigned char>(line.front())))
      line.remove_prefix(1);
    while (!line.empty() && absl::ascii_isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == line.size()) {
      return absl::InvalidArgumentError(fmt::format(
          "--metrics-basic-auth-file '{}': line {}: expected user:password", file_, number));
    }
    users[std::string(line.substr(0, colon))] = security::Sha256(line.substr(colon + 1));
  }
  if (users.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("--metrics-basic-auth-file '{}': no user:password line", file_));
  }
  return users;
}

bool MetricsAuth::Check(const std::string& user, const std::string& password) const {
  const std::string digest = security::Sha256(password);
  std::lock_guard lock(mu_);
  auto it = users_.find(user);
  return it != users_.end() && CRYPTO_memcmp(it->second.data(), digest.data(), digest.size()) == 0;
}

}  // namespace feed::server

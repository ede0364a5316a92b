// fuzz_config: server::ParseServerConfig on arbitrary command lines (and config files).
//
// Input: tokens separated by NUL or newline (at most 64) become argv[1..]. A token
// "%%config-file%%" ends the command line: the rest of the input (raw) is the body of a
// config file. Every --config value (`--config X` or `--config=X`) is replaced with the path
// of that file, written to a private temp dir (or with a path there that does not exist
// when the input has no body), so that the parser never reads a real file.
//
// The parser must return INVALID_ARGUMENT, a --help result (no config, exit code 0), or a
// config that passes the checks the parser promises; an escaped exception, a crash or an
// exit() is a finding. --help prints to stdout, which is sent to /dev/null (set
// FUZZ_CONFIG_STDOUT=1 to keep it).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"
#include "fuzz_common.h"
#include "server/config.h"

extern char** environ;

namespace feed::fuzz {
namespace {

constexpr size_t kMaxTokens = 64;
constexpr std::string_view kConfigMarker = "%%config-file%%";

std::string g_config_path;   // inside the private temp dir
std::string g_missing_path;  // never created

void CheckConfig(const server::ServerConfig& c) {
  FUZZ_CHECK(!c.listen.empty(), "empty --listen accepted");
  FUZZ_CHECK(!c.storage.path.empty(), "empty --data-dir accepted");
  FUZZ_CHECK(c.core.default_hold_ttl_ms <= c.core.limits.max_hold_ttl_ms,
             fmt::format("hold ttl {} > max {}", c.core.default_hold_ttl_ms,
                         c.core.limits.max_hold_ttl_ms));
  FUZZ_CHECK(c.core.default_hold_ttl_ms >= 1000, fmt::format("{}", c.core.default_hold_ttl_ms));
  FUZZ_CHECK(c.core.max_batch_commands >= 1, fmt::format("{}", c.core.max_batch_commands));
  FUZZ_CHECK(c.core.max_queue_depth >= 1, fmt::format("{}", c.core.max_queue_depth));
  FUZZ_CHECK(c.core.sweep_interval_ms >= 10, fmt::format("{}", c.core.sweep_interval_ms));
  FUZZ_CHECK(c.core.limits.max_id_length >= 8 && c.core.limits.max_id_length <= 1024,
             fmt::format("{}", c.core.limits.max_id_length));
  FUZZ_CHECK(c.core.limits.max_quantity >= 1, fmt::format("{}", c.core.limits.max_quantity));
  FUZZ_CHECK(c.max_receive_message_bytes >= 1024, fmt::format("{}", c.max_receive_message_bytes));
  FUZZ_CHECK(c.handshake_timeout_ms >= 100 && c.handshake_timeout_ms <= 600000,
             fmt::format("{}", c.handshake_timeout_ms));
  FUZZ_CHECK(c.kafka.partitions >= 1, fmt::format("{}", c.kafka.partitions));
  FUZZ_CHECK(c.storage.memtable_budget_bytes >= size_t{8} << 20,
             fmt::format("{}", c.storage.memtable_budget_bytes));
  FUZZ_CHECK(c.log_format == "text" || c.log_format == "json", c.log_format);
  for (const auto& [k, v] : c.kafka.kafka_properties)
    FUZZ_CHECK(!k.empty(), "empty kafka property key");
}

}  // namespace
}  // namespace feed::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace feed::fuzz;
  // The parser reads FEED_* variables: start from none, so that an input means the same
  // thing in every environment.
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    if (kv.starts_with("FEED_")) names.emplace_back(kv.substr(0, kv.find('=')));
  }
  for (const auto& n : names) unsetenv(n.c_str());

  const char* tmp = std::getenv("TMPDIR");
  std::string dir = fmt::format("{}/feed-fuzz-config-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  g_config_path = dir + "/feed.toml";
  g_missing_path = dir + "/does-not-exist.toml";
  static std::string s_dir = dir;
  std::atexit([] {
    std::remove(g_config_path.c_str());
    rmdir(s_dir.c_str());
  });
  std::fprintf(stderr, "fuzz_config: config files go to %s\n", dir.c_str());

  if (std::getenv("FUZZ_CONFIG_STDOUT") == nullptr) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      std::fflush(stdout);
      dup2(devnull, STDOUT_FILENO);
      close(devnull);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feed::fuzz;
  std::string_view input(reinterpret_cast<const char*>(data), size);

  std::vector<std::string> tokens{"feed-server"};
  std::optional<std::string_view> body;
  size_t pos = 0;
  while (pos <= input.size() && tokens.size() <= kMaxTokens) {
    size_t end = input.find_first_of(std::string_view("\0\n", 2), pos);
    if (end == std::string_view::npos) end = input.size();
    std::string_view token = input.substr(pos, end - pos);
    if (token == kConfigMarker) {
      body = input.substr(std::min(end + 1, input.size()));
      break;
    }
    if (!(token.empty() && end == input.size())) tokens.emplace_back(token);
    pos = end + 1;
  }

  // Only our own file (or a path that does not exist) ever reaches --config.
  const std::string& path = body ? g_config_path : g_missing_path;
  for (size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i] == "--config") {
      if (i + 1 < tokens.size()) tokens[i + 1] = path;
    } else if (tokens[i].starts_with("--config=")) {
      tokens[i] = "--config=" + path;
    }
  }
  if (body) {
    FILE* f = std::fopen(g_config_path.c_str(), "wb");
    FUZZ_CHECK(f != nullptr, g_config_path);
    std::fwrite(body->data(), 1, body->size(), f);
    std::fclose(f);
  }

  std::vector<char*> argv;
  for (auto& t : tokens) argv.push_back(t.data());
  argv.push_back(nullptr);
  auto result = feed::server::ParseServerConfig(static_cast<int>(tokens.size()), argv.data());
  if (!result.ok()) {
    FUZZ_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument,
               ToString(result.status()));
  } else if (result->config) {
    FUZZ_CHECK(result->exit_code == 0, "a config with a non-zero exit code");
    CheckConfig(*result->config);
  } else {
    FUZZ_CHECK(result->exit_code == 0, fmt::format("exit code {}", result->exit_code));
  }
  if (body) std::remove(g_config_path.c_str());
  return 0;
}

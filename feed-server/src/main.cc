// feed-server: parse the config, start everything, wait for SIGTERM/SIGINT, shut down
// gracefully, exit 0.
#include <csignal>
#include <iostream>

#include "absl/synchronization/mutex.h"
#include "app/cluster_server.h"
#include "app/feed_server.h"
#include "google/protobuf/util/json_util.h"
#include "server/config.h"
#include "server/observability.h"
#include "spdlog/spdlog.h"

namespace {

// --check: the audit's report as JSON on stdout; 0 sound, 1 violations, 2 unreadable.
int CheckAndExit(const feed::server::ServerConfig& config) {
  auto report = feed::server::CheckStoreOffline(config);
  if (!report.ok()) {
    std::cerr << "feed-server: --check: " << report.status().message() << "\n";
    return 2;
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = true;
  print.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(*report, &json, print);
  std::cout << json;
  return report->violation_count() == 0 ? 0 : 1;
}

// A line scripts wait for on stdout; with --log-format json a log line like every other, so
// that each line of the process parses.
void Announce(const feed::server::ServerConfig& config, const std::string& line) {
  if (config.log_format == "json") {
    spdlog::info(line);
    spdlog::default_logger()->flush();
  } else {
    std::cout << line << std::endl;
  }
}

// Starts the server (FeedServer, or ClusterServer in cluster mode), prints the line scripts wait
// for, serves until SIGTERM/SIGINT, stops it gracefully.
template <class Server>
int Serve(const feed::server::ServerConfig& config, const sigset_t& signals) {
  auto server = Server::Start(config);
  if (!server.ok()) {
    spdlog::critical("feed-server: cannot start: {}", server.status().ToString());
    feed::server::ShutdownLogging();
    return 1;
  }
  Announce(config, "feed-server listening on " + (*server)->address());
  if constexpr (requires { (*server)->http_address(); }) {
    if (!(*server)->http_address().empty()) {
      Announce(config, "feed-server http listening on " + (*server)->http_address());
    }
  }
  int received = 0;
  sigwait(&signals, &received);
  spdlog::info("feed-server: received {}", received == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  server->reset();
  feed::server::ShutdownLogging();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil is built with debug checks on, so every absl::Mutex lock inside gRPC
  // also walks a global deadlock graph (~2 % of the server's CPU under load). Off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto parsed = feed::server::ParseServerConfig(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "feed-server: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!parsed->config) return parsed->exit_code;
  const auto& config = *parsed->config;
  feed::server::SetupLogging(config.log_format, config.log_level);
  if (config.check_only) return CheckAndExit(config);

  // Block the signals in every thread (threads inherit the mask) and wait for them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (config.cluster.shards > 0) return Serve<feed::server::ClusterServer>(config, signals);
  return Serve<feed::server::FeedServer>(config, signals);
}

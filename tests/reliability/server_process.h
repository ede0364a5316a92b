// The real feed-server binary as a child process for the reliability tests: started with
// its own data dir and port on 127.0.0.1, SIGKILLed and its data dir removed if the test
// ends early, its resident memory and open file descriptors readable from /proc, and its
// RocksDB memory gauges readable from its /metrics endpoint.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "util/free_port.h"

extern char** environ;

#ifndef FEED_SANITIZED
#define FEED_SANITIZED 0
#endif

namespace feed::testing {

// Under a sanitizer (a FEED_SANITIZE build) the server runs several times slower and its
// resident memory includes shadow memory and the quarantine of freed blocks: the scenarios
// still run in full (memory errors, UB and races are what that build checks), but figures
// of time and memory are asserted only in the normal build.
inline constexpr bool kCheckFigures = !FEED_SANITIZED;
// How much longer a test waits for something the server will do (close a socket, reach a
// state) in that build; TSan slows the server down about tenfold.
inline constexpr int kSlowdown = FEED_SANITIZED ? 10 : 1;

class ServerProcess {
 public:
  // Starts `binary --listen 127.0.0.1:<port> --data-dir <tmp> --metrics-listen
  // 127.0.0.1:<port'> --http-listen "" --log-rpcs false` plus `extra_args`, on free ports.
  ServerProcess(const std::string& binary, const std::vector<std::string>& extra_args) {
    char tmpl[] = "/tmp/feed-reliability-XXXXXX";
    dir_ = mkdtemp(tmpl);
    port_ = test_util::FreeLoopbackPort();
    address_ = "127.0.0.1:" + std::to_string(port_);
    metrics_address_ = "127.0.0.1:" + std::to_string(test_util::FreeLoopbackPort());
    std::vector<std::string> args = {binary,
                                     "--listen",
                                     address_,
                                     "--data-dir",
                                     dir_ + "/data",
                                     "--metrics-listen",
                                     metrics_address_,
                                     "--log-rpcs",
                                     "false",
                                     "--http-listen",
                                     ""};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) pid_ = 0;
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }
  int port() const { return port_; }

  // SIGTERM, wait; the raw wait status (0 after a clean exit).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return status;
  }

  long RssKb() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return 0;
  }

  // Every sample of the server's /metrics: "name{labels}" -> value (empty if unreadable).
  std::map<std::string, double> Metrics() const {
    std::map<std::string, double> samples;
    const std::string command = "curl -sf http://" + metrics_address_ + "/metrics";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return samples;
    char line[1024];
    while (std::fgets(line, sizeof line, pipe) != nullptr) {
      const std::string text = line;
      const size_t space = text.rfind(' ');
      if (text.empty() || text[0] == '#' || space == std::string::npos) continue;
      samples[text.substr(0, space)] = std::stod(text.substr(space + 1));
    }
    if (pclose(pipe) != 0) samples.clear();
    return samples;
  }

  // The `feed_state{what="X"}` gauges: X -> value.
  std::map<std::string, double> StateGauges() const {
    std::map<std::string, double> gauges;
    const std::string prefix = "feed_state{what=\"";
    for (const auto& [series, value] : Metrics()) {
      if (series.rfind(prefix, 0) == 0 && series.size() > prefix.size() + 2) {
        gauges[series.substr(prefix.size(), series.size() - prefix.size() - 2)] = value;
      }
    }
    return gauges;
  }

  // The sum of every series of metric `name` (-1 if it has none).
  double MetricTotal(const std::string& name) const {
    double total = -1;
    for (const auto& [series, value] : Metrics()) {
      if (series == name || series.rfind(name + "{", 0) == 0)
        total = (total < 0 ? 0 : total) + value;
    }
    return total;
  }

  // RocksDB's memtables plus its block cache, in KB: memory the server holds on purpose,
  // bounded by its configuration (-1 when /metrics cannot be read). Memory checks subtract
  // it so that what they compare is the rest of the process.
  long RocksDbCachesKb() const { return RocksDbCachesKb(StateGauges()); }
  // The same from gauges already read with StateGauges().
  static long RocksDbCachesKb(const std::map<std::string, double>& gauges) {
    const auto memtables = gauges.find("rocksdb_memtables_bytes");
    const auto cache = gauges.find("rocksdb_block_cache_bytes");
    if (memtables == gauges.end() || cache == gauges.end()) return -1;
    return static_cast<long>((memtables->second + cache->second) / 1024);
  }

  int OpenFds() const {
    std::error_code ec;
    int n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++n;
    }
    return n;
  }

 private:
  std::string dir_;
  std::string address_;
  std::string metrics_address_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace feed::testing

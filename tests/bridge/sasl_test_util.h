// What the tests against the SASL_SSL broker (tests/bridge/sasl_broker.sh) share: its
// addresses, its credentials, the broker started for a suite when it is not running, files
// replaced the way a secret manager replaces them, and a sink that keeps every line the
// "bridge" logger writes (to look for the password in). Needs FEED_REPO_DIR and
// FEED_SASL_TEST_DIR.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace feed::bridge::test {

inline int EnvPort(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// Same defaults as tests/bridge/sasl_broker.sh.
inline std::string PlaintextBrokers() {
  return "127.0.0.1:" + std::to_string(EnvPort("BRIDGE_SASL_KAFKA_PORT", 19192));
}
inline std::string SaslBrokers() {
  return "127.0.0.1:" + std::to_string(EnvPort("BRIDGE_SASL_PORT", 19194));
}

inline int BrokerScript(const std::string& command) {
  std::string cmd = std::string(FEED_REPO_DIR) + "/tests/bridge/sasl_broker.sh " + command + " " +
                    FEED_SASL_TEST_DIR + " 1>&2";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Replaces `path` the way a secret manager does: a new file renamed over the old one.
inline void WriteFileAtomically(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
  }
  chmod(tmp.c_str(), 0600);
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

// Every line the "bridge" logger writes, at every level, formatted as the application would.
class CaptureSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  // The first line containing every one of `parts`, or "".
  std::string Find(const std::vector<std::string>& parts) {
    for (const std::string& line : lines()) {
      bool all = true;
      for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
      if (all) return line;
    }
    return "";
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    lines_.emplace_back(buf.data(), buf.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;  // guarded by mutex_
};

// Replaces the "bridge" logger with one that keeps every line at every level (librdkafka's
// debug lines included) in the returned sink, and prints info and above on stderr for the
// test log. spdlog::drop("bridge") in TearDown ends it.
inline std::shared_ptr<CaptureSink> CaptureBridgeLog() {
  auto capture = std::make_shared<CaptureSink>();
  auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  err->set_level(spdlog::level::info);
  spdlog::drop("bridge");
  auto logger = std::make_shared<spdlog::logger>("bridge", spdlog::sinks_init_list{capture, err});
  logger->set_level(spdlog::level::trace);
  spdlog::register_logger(logger);
  return capture;
}

// Fails the test for every captured line that holds one of `secrets`.
inline void ExpectNoSecretLogged(CaptureSink& capture, const std::vector<std::string>& secrets) {
  const std::vector<std::string> lines = capture.lines();
  for (const std::string& secret : secrets) {
    for (const std::string& line : lines) {
      EXPECT_EQ(line.find(secret), std::string::npos) << "the password was logged: " << line;
    }
  }
  std::printf("%zu lines logged by the bridge, none with a password\n", lines.size());
}

// The broker for one suite: started in SetUpTestSuite when it is not running (a test binary
// run alone), stopped in TearDownTestSuite only if it was started there.
class SaslBroker {
 public:
  void Start() {
    if (BrokerScript("status >/dev/null 2>&1") != 0) {
      started_here_ = true;
      ok_ = BrokerScript("start") == 0;
    } else {
      ok_ = true;
    }
    user_ = ReadFile(std::string(FEED_SASL_TEST_DIR) + "/sasl.user");
    password_ = ReadFile(std::string(FEED_SASL_TEST_DIR) + "/sasl.password");
  }
  void Stop() {
    if (started_here_) BrokerScript("stop");
  }
  bool ok() const { return ok_; }
  const std::string& user() const { return user_; }
  const std::string& password() const { return password_; }
  std::string ca_file() const { return std::string(FEED_SASL_TEST_DIR) + "/certs/ca.crt"; }

 private:
  bool ok_ = false;
  bool started_here_ = false;
  std::string user_;
  std::string password_;
};

}  // namespace feed::bridge::test

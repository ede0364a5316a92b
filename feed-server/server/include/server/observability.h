// Logging (spdlog, text or JSON) and Prometheus metrics (prometheus-cpp) of the server.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "spdlog/logger.h"

namespace feed::server {

// Installs the default logger and the "rpc" logger. json: one JSON object per line.
void SetupLogging(const std::string& format, const std::string& level);
// Stops the logging thread after it has written every queued line, then frees the loggers.
void ShutdownLogging();

class Metrics {
 public:
  Metrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One finished call: counts it and observes its latency, by method and code.
  void RecordCall(std::string_view method, absl::StatusCode code, double seconds);
  // A request whose bytes could not be parsed.
  void UnparseableRequest(std::string_view method);
  void StreamOpened(std::string_view kind);
  void StreamClosed(std::string_view kind);
  // Updates queued (or dequeued, negative) for stream readers, and conflations.
  void QueuedUpdates(int64_t delta) { queued_updates_->Increment(static_cast<double>(delta)); }
  void Conflated(uint64_t n) { conflated_->Increment(static_cast<double>(n)); }
  void SlowReaderEnded() { slow_reader_ended_->Increment(); }
  // The writer's batches (group commit).
  void ObserveBatch(size_t commands, size_t events, double commit_seconds);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* calls_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Gauge>* open_streams_;
  prometheus::Gauge* queued_updates_;
  prometheus::Counter* conflated_;
  prometheus::Counter* slow_reader_ended_;
  prometheus::Histogram* batch_commands_;
  prometheus::Histogram* batch_commit_seconds_;
  prometheus::Counter* events_;
  prometheus::Family<prometheus::Counter>* unparseable_;

  struct CallMetrics {
    prometheus::Counter* calls = nullptr;
    prometheus::Histogram* latency = nullptr;
  };
  std::mutex mu_;
  // Per method, per status code (0-16): found by the method's view, no string per call.
  std::map<std::string, std::array<CallMetrics, 17>, std::less<>> by_method_code_;
  std::map<std::string, prometheus::Gauge*, std::less<>> streams_by_kind_;
  std::map<std::string, prometheus::Counter*, std::less<>> unparseable_by_method_;
};

// One access log line, as key=value text (values with spaces or quotes quoted) or as the
// fields of one JSON object (--log-format); the gRPC and HTTP access logs both write it.
using AccessField = std::pair<std::string_view, std::variant<std::string_view, int64_t>>;
void WriteAccessLine(spdlog::logger& logger, bool json, const std::vector<AccessField>& fields);

// One line per call on the "rpc" logger: method, peer, subject (when authenticated),
// duration, code and message. Thread-safe.
class AccessLog {
 public:
  explicit AccessLog(bool json);
  void Write(std::string_view method, std::string_view peer, std::string_view subject,
             double seconds, const absl::Status& status) const;

 private:
  std::shared_ptr<spdlog::logger> logger_;
  bool json_;
};

// Times one RPC; Finish records the metrics and writes the access log line (none when
// `log` is null).
class CallRecord {
 public:
  CallRecord(Metrics* metrics, const AccessLog* log, std::string_view method, std::string peer)
      : metrics_(metrics),
        log_(log),
        method_(method),
        peer_(std::move(peer)),
        start_(std::chrono::steady_clock::now()) {}
  // The authenticated subject, for the log line.
  void set_subject(std::string subject) { subject_ = std::move(subject); }
  void Finish(const absl::Status& status);

 private:
  Metrics* metrics_;
  const AccessLog* log_;
  std::string_view method_;
  std::string peer_;
  std::string subject_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace feed::server

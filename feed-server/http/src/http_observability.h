// The gateway's metrics (feed_http_*) and its access log line: one line per request on the
// "http" logger, key=value text or JSON fields as the rpc log (--log-format).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "spdlog/logger.h"

namespace feed::http {

class HttpMetrics {
 public:
  explicit HttpMetrics(prometheus::Registry& registry);
  // `route` is the route's label ("POST /v1/reservations") or "-" when none matched.
  void Record(std::string_view route, int status, double seconds);
  void Connections(int delta) { connections_->Increment(delta); }

 private:
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* durations_;
  prometheus::Gauge* connections_;
  std::mutex mu_;
  std::map<std::pair<std::string, int>, prometheus::Counter*, std::less<>> counters_;
  std::map<std::string, prometheus::Histogram*, std::less<>> histograms_;
};

class HttpAccessLog {
 public:
  explicit HttpAccessLog(bool json);
  // `subject`: the authenticated caller, empty when there is none.
  void Write(std::string_view method, std::string_view path, int status, double seconds,
             size_t bytes, std::string_view peer, std::string_view subject = {}) const;

 private:
  std::shared_ptr<spdlog::logger> logger_;
  bool json_;
};

}  // namespace feed::http

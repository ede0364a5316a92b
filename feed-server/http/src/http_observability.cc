#include "http_observability.h"

#include "common/module_logger.h"
#include "server/observability.h"

namespace feed::http {

HttpMetrics::HttpMetrics(prometheus::Registry& registry)
    : requests_(&prometheus::BuildCounter()
                     .Name("feed_http_requests_total")
                     .Help("HTTP requests by route and status")
                     .Register(registry)),
      durations_(&prometheus::BuildHistogram()
                      .Name("feed_http_request_duration_seconds")
                      .Help("HTTP request duration by route (streams: until they end)")
                      .Register(registry)),
      connections_(&prometheus::BuildGauge()
                        .Name("feed_http_open_connections")
                        .Help("Open HTTP connections")
                        .Register(registry)
                        .Add({})) {}

void HttpMetrics::Record(std::string_view route, int status, double seconds) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};
  std::lock_guard lock(mu_);
  auto key = std::make_pair(std::string(route), status);
  auto c = counters_.find(key);
  if (c == counters_.end()) {
    c = counters_
            .emplace(key,
                     &requests_->Add({{"route", key.first}, {"status", std::to_string(status)}}))
            .first;
  }
  c->second->Increment();
  auto h = histograms_.find(route);
  if (h == histograms_.end()) {
    h = histograms_
            .emplace(std::string(route),
                     &durations_->Add({{"route", std::string(route)}}, kBuckets))
            .first;
  }
  h->second->Observe(seconds);
}

HttpAccessLog::HttpAccessLog(bool json) : logger_(ModuleLogger("http")), json_(json) {}

void HttpAccessLog::Write(std::string_view method, std::string_view path, int status,
                          double seconds, size_t bytes, std::string_view peer,
                          std::string_view subject) const {
  std::vector<server::AccessField> fields = {{"method", method},
                                             {"path", path},
                                             {"status", int64_t{status}},
                                             {"duration_us", static_cast<int64_t>(seconds * 1e6)},
                                             {"bytes", static_cast<int64_t>(bytes)},
                                             {"peer", peer}};
  if (!subject.empty()) fields.emplace_back("subject", subject);
  server::WriteAccessLine(*logger_, json_, fields);
}

}  // namespace feed::http

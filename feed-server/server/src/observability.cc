#include "server/observability.h"

#include "common/module_logger.h"
#include "nlohmann/json.hpp"
#include "spdlog/async.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace feed::server {
namespace {

// %j: the message as a JSON string (quotes included), so text from any module stays valid JSON.
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string s = nlohmann::json(std::string(msg.payload.data(), msg.payload.size())).dump();
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

void SetupLogging(const std::string& format, const std::string& level) {
  // Asynchronous loggers keep stdout writes off the request path; when the queue is full the
  // oldest lines are dropped rather than blocking a request.
  spdlog::init_thread_pool(65536, 1);
  // A sink holds the formatter (a logger's set_pattern sets its sinks'), so the access logs,
  // whose lines are formatted apart, write through a sink of their own. One logging thread
  // writes both: lines do not interleave.
  auto sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  auto access_sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  auto make = [&](const std::string& name) {
    const bool access = name == "rpc" || name == "http";
    auto logger = std::make_shared<spdlog::async_logger>(
        name, access ? access_sink : sink, spdlog::thread_pool(),
        spdlog::async_overflow_policy::overrun_oldest);
    if (format == "json" && access) {
      // The access logs write their fields themselves (AccessLog, HttpAccessLog).
      logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n",%v})");
    } else if (format == "json") {
      auto formatter = std::make_unique<spdlog::pattern_formatter>();
      formatter->add_flag<JsonMessageFlag>('j').set_pattern(
          R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":%j})");
      logger->set_formatter(std::move(formatter));
    } else {
      logger->set_pattern("%Y-%m-%dT%H:%M:%S.%f %^%l%$ [%n] %v");
    }
    logger->set_level(spdlog::level::from_str(level));
    return logger;
  };
  spdlog::drop_all();
  spdlog::set_default_logger(make("feed"));
  spdlog::register_logger(make("rpc"));
  spdlog::register_logger(make("http"));
  spdlog::flush_every(std::chrono::seconds(1));
  spdlog::flush_on(spdlog::level::warn);
}

void ShutdownLogging() {
  // spdlog::shutdown() drops the loggers before it joins the logging thread. Their last
  // owner is then whichever thread releases them last, ordered only by a reference count
  // inside Debian's (uninstrumented) libspdlog, which TSan cannot see. Holding them here
  // until the thread is joined makes the order plain: the join, then the frees.
  std::vector<std::shared_ptr<spdlog::logger>> loggers;
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> l) { loggers.push_back(std::move(l)); });
  spdlog::shutdown();
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  calls_ = &prometheus::BuildCounter()
                .Name("feed_rpc_calls_total")
                .Help("Finished RPCs by method and status code")
                .Register(*registry_);
  latency_ = &prometheus::BuildHistogram()
                  .Name("feed_rpc_duration_seconds")
                  .Help("RPC latency by method and status code (streams: lifetime)")
                  .Register(*registry_);
  open_streams_ = &prometheus::BuildGauge()
                       .Name("feed_open_streams")
                       .Help("Open server streams by kind")
                       .Register(*registry_);
  queued_updates_ = &prometheus::BuildGauge()
                         .Name("feed_stream_queued_updates")
                         .Help("Updates waiting in the queues of all stream readers")
                         .Register(*registry_)
                         .Add({});
  conflated_ = &prometheus::BuildCounter()
                    .Name("feed_stream_conflated_total")
                    .Help("Stock updates replaced by a newer one before a slow reader got them")
                    .Register(*registry_)
                    .Add({});
  slow_reader_ended_ = &prometheus::BuildCounter()
                            .Name("feed_stream_slow_reader_ended_total")
                            .Help("Streams ended with RESOURCE_EXHAUSTED for falling behind")
                            .Register(*registry_)
                            .Add({});
  batch_commands_ = &prometheus::BuildHistogram()
                         .Name("feed_writer_batch_commands")
                         .Help("Commands per writer batch (group commit size)")
                         .Register(*registry_)
                         .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64,
                                                                          128, 256, 512, 1024});
  batch_commit_seconds_ = &prometheus::BuildHistogram()
                               .Name("feed_writer_commit_seconds")
                               .Help("Time to commit one writer batch (WriteBatch + WAL sync)")
                               .Register(*registry_)
                               .Add({}, prometheus::Histogram::BucketBoundaries{
                                            0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                            0.01, 0.025, 0.05, 0.1, 0.5});
  events_ = &prometheus::BuildCounter()
                 .Name("feed_events_committed_total")
                 .Help("Events written to the outbox")
                 .Register(*registry_)
                 .Add({});
  unparseable_ = &prometheus::BuildCounter()
                      .Name("feed_request_parse_errors_total")
                      .Help("Requests whose bytes could not be parsed, by method")
                      .Register(*registry_);
}

void Metrics::UnparseableRequest(std::string_view method) {
  prometheus::Counter* counter;
  {
    std::lock_guard lock(mu_);
    auto it = unparseable_by_method_.find(method);
    if (it == unparseable_by_method_.end()) {
      it = unparseable_by_method_
               .emplace(std::string(method), &unparseable_->Add({{"method", std::string(method)}}))
               .first;
    }
    counter = it->second;
  }
  counter->Increment();
}

void Metrics::RecordCall(std::string_view method, absl::StatusCode code, double seconds) {
  const size_t slot = std::min<size_t>(static_cast<size_t>(code), 16);
  CallMetrics m;
  {
    std::lock_guard lock(mu_);
    auto it = by_method_code_.find(method);
    if (it == by_method_code_.end()) it = by_method_code_.try_emplace(std::string(method)).first;
    CallMetrics& found = it->second[slot];
    if (found.calls == nullptr) {
      std::map<std::string, std::string> labels{{"method", std::string(method)},
                                                {"code", absl::StatusCodeToString(code)}};
      found = {&calls_->Add(labels),
               &latency_->Add(labels, prometheus::Histogram::BucketBoundaries{
                                          0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                          0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30})};
    }
    m = found;
  }
  m.calls->Increment();
  m.latency->Observe(seconds);
}

void Metrics::StreamOpened(std::string_view kind) {
  std::lock_guard lock(mu_);
  auto it = streams_by_kind_.find(kind);
  if (it == streams_by_kind_.end()) {
    it = streams_by_kind_
             .emplace(std::string(kind), &open_streams_->Add({{"kind", std::string(kind)}}))
             .first;
  }
  it->second->Increment();
}

void Metrics::StreamClosed(std::string_view kind) {
  std::lock_guard lock(mu_);
  auto it = streams_by_kind_.find(kind);
  if (it != streams_by_kind_.end()) it->second->Decrement();
}

void Metrics::ObserveBatch(size_t commands, size_t events, double commit_seconds) {
  batch_commands_->Observe(static_cast<double>(commands));
  batch_commit_seconds_->Observe(commit_seconds);
  events_->Increment(static_cast<double>(events));
}

void WriteAccessLine(spdlog::logger& logger, bool json, const std::vector<AccessField>& fields) {
  if (json) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, value] : fields) {
      if (const auto* text = std::get_if<std::string_view>(&value)) {
        object[std::string(key)] = *text;
      } else {
        object[std::string(key)] = std::get<int64_t>(value);
      }
    }
    std::string line = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    logger.info("{}", std::string_view(line).substr(1, line.size() - 2));
    return;
  }
  std::string line;
  for (const auto& [key, value] : fields) {
    if (!line.empty()) line += ' ';
    line += key;
    line += '=';
    if (const auto* text = std::get_if<std::string_view>(&value)) {
      if (text->find_first_of(" \"\\") == std::string_view::npos && !text->empty()) {
        line += *text;
      } else {
        line +=
            nlohmann::json(*text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    } else {
      line += std::to_string(std::get<int64_t>(value));
    }
  }
  logger.info("{}", line);
}

AccessLog::AccessLog(bool json) : logger_(ModuleLogger("rpc")), json_(json) {}

void AccessLog::Write(std::string_view method, std::string_view peer, std::string_view subject,
                      double seconds, const absl::Status& status) const {
  std::vector<AccessField> fields = {{"method", method}, {"peer", peer}};
  if (!subject.empty()) fields.emplace_back("subject", subject);
  fields.emplace_back("duration_us", static_cast<int64_t>(seconds * 1e6));
  const std::string code = absl::StatusCodeToString(status.code());
  fields.emplace_back("code", code);
  if (!status.ok()) {
    fields.emplace_back("message",
                        std::string_view(status.message().data(), status.message().size()));
  }
  WriteAccessLine(*logger_, json_, fields);
}

void CallRecord::Finish(const absl::Status& status) {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (metrics_) metrics_->RecordCall(method_, status.code(), seconds);
  if (log_) log_->Write(method_, peer_, subject_, seconds, status);
}

}  // namespace feed::server

#include "server/stream_support.h"

#include <algorithm>

#include "fmt/format.h"

namespace feed::server {

core::QueueLimits StreamQueueLimits(const ServerConfig& config) {
  core::QueueLimits limits;
  limits.max_queued = static_cast<size_t>(config.stream_max_queued_levels);
  limits.conflate_after =
      std::min(static_cast<size_t>(config.stream_conflate_after), limits.max_queued);
  return limits;
}

absl::Status StreamSupport::Register(StreamRegistry::Stream* stream) {
  if (!sc_.streams->TryAdd(stream)) {
    return absl::ResourceExhaustedError(
        fmt::format("too many open streams (limit {})", sc_.config->max_open_streams));
  }
  registered_ = stream;
  sc_.metrics->StreamOpened(kind_);
  return absl::OkStatus();
}

core::ChangeFeed::Attach StreamSupport::Attach(core::ChangeListener* listener,
                                               uint64_t after_sequence,
                                               std::vector<std::string> keys) {
  auto attach = core_->change_feed().Subscribe(listener, after_sequence, std::move(keys));
  subscribed_ = listener;
  return attach;
}

void StreamSupport::Unregister() {
  if (subscribed_) core_->change_feed().Unsubscribe(subscribed_);
  subscribed_ = nullptr;
  if (registered_) {
    sc_.streams->Remove(registered_);
    sc_.metrics->StreamClosed(kind_);
  }
  registered_ = nullptr;
}

bool StreamSupport::ReaderBehind() const {
  const int64_t after_ms = sc_.config->stream_conflate_after_ms;
  return after_ms > 0 && writing_ &&
         std::chrono::steady_clock::now() - write_started_ > std::chrono::milliseconds(after_ms);
}

absl::Status StreamSupport::CheckSlowReader(const absl::Status& queue_status) {
  absl::Status why = queue_status;
  if (why.ok() && writing_ &&
      std::chrono::steady_clock::now() - write_started_ >
          std::chrono::milliseconds(sc_.config->stream_stall_timeout_ms)) {
    why = absl::ResourceExhaustedError(
        fmt::format("reader stalled: no write completed for {} ms; reconnect, resuming from the "
                    "last sequence received",
                    sc_.config->stream_stall_timeout_ms));
  }
  if (!why.ok()) sc_.metrics->SlowReaderEnded();
  return why;
}

void StreamSupport::ReportQueue(size_t queued, uint64_t conflated_total) {
  sc_.metrics->QueuedUpdates(static_cast<int64_t>(queued) - static_cast<int64_t>(reported_queued_));
  if (conflated_total > reported_conflated_) {
    sc_.metrics->Conflated(conflated_total - reported_conflated_);
  }
  reported_queued_ = queued;
  reported_conflated_ = conflated_total;
}

}  // namespace feed::server

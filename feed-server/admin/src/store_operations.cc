#include "admin/store_operations.h"

#include <chrono>
#include <filesystem>

#include "admin/backup.h"
#include "core/store_audit.h"
#include "fmt/format.h"

namespace feed::admin {

StoreOperations::StoreOperations(storage::Store& store, const core::Clock& clock,
                                 const core::CoreOptions& core_options,
                                 StoreOperationsOptions options, bridge::Relay* relay)
    : store_(store),
      clock_(clock),
      core_options_(core_options),
      options_(std::move(options)),
      relay_(relay) {}

StoreOperations::~StoreOperations() {
  for (Slot* slot : {&audit_, &backup_, &replay_}) {
    std::lock_guard lock(slot->mu);
    if (slot->thread.joinable()) slot->thread.join();
  }
}

bool StoreOperations::Start(Slot& slot, Work work) {
  std::lock_guard lock(slot.mu);
  if (slot.busy.exchange(true)) return false;
  if (slot.thread.joinable()) slot.thread.join();  // the previous one, finished
  slot.thread = std::thread([&slot, work = std::move(work)]() mutable {
    auto answer = std::move(work)();
    slot.busy = false;  // first, so that a caller answered can start the next one at once
    std::move(answer)();
  });
  return true;
}

template <class Resp>
void StoreOperations::Launch(Slot& slot, std::string_view what, Done<Resp> done,
                             absl::AnyInvocable<absl::StatusOr<Resp>() &&> work) {
  auto shared = std::make_shared<Done<Resp>>(std::move(done));
  const bool started = Start(slot, [shared, work = std::move(work)]() mutable -> Answer {
    auto result = std::move(work)();
    return
        [shared, result = std::move(result)]() mutable { std::move (*shared)(std::move(result)); };
  });
  if (!started) {
    std::move (*shared)(
        absl::AbortedError(fmt::format("{} is running already: try again when it ends", what)));
  }
}

namespace {
int64_t MillisSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}
}  // namespace

void StoreOperations::CheckStore(const ::admin::v1::CheckStoreRequest& request,
                                 Done<::admin::v1::CheckStoreResponse> done) {
  if (request.max_violations() > options_.max_listed_violations) {
    std::move(done)(absl::InvalidArgumentError(
        fmt::format("max_violations: {} is over the limit of {}", request.max_violations(),
                    options_.max_listed_violations)));
    return;
  }
  const size_t max = request.max_violations() == 0 ? 100 : request.max_violations();
  Launch<::admin::v1::CheckStoreResponse>(audit_, "an audit", std::move(done), [this, max] {
    auto report = core::AuditStore(store_, clock_, core_options_, max);
    if (report.ok()) {
      std::lock_guard lock(stats_mu_);
      ++stats_.runs;
      stats_.last_checked_at_ms = report->checked_at_ms();
      stats_.last_duration_ms = report->duration_ms();
      stats_.last_violations = report->violation_count();
    }
    return report;
  });
}

void StoreOperations::Backup(const ::admin::v1::BackupRequest& request,
                             Done<::admin::v1::BackupResponse> done) {
  if (absl::Status s = ValidateBackupName(request.name()); !s.ok()) {
    std::move(done)(std::move(s));
    return;
  }
  if (options_.backup_dir.empty()) {
    std::move(done)(
        absl::FailedPreconditionError("backups are off: start the server with --backup-dir DIR"));
    return;
  }
  std::filesystem::path path = std::filesystem::path(options_.backup_dir) / request.name();
  if (options_.shard) path /= ShardFolderName(options_.shard->shard);
  Launch<::admin::v1::BackupResponse>(
      backup_, "a backup", std::move(done),
      [this, path = path.string()]() -> absl::StatusOr<::admin::v1::BackupResponse> {
        const auto began = std::chrono::steady_clock::now();
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
        auto manifest = WriteBackup(store_, path, clock_.NowMillis(), options_.shard);
        if (!manifest.ok()) return manifest.status();
        ::admin::v1::BackupResponse response;
        response.set_path(path);
        *response.mutable_manifest() = std::move(*manifest);
        response.set_duration_ms(MillisSince(began));
        return response;
      });
}

void StoreOperations::Replay(const ::admin::v1::ReplayRequest& request,
                             Done<::admin::v1::ReplayResponse> done) {
  if (relay_ == nullptr) {
    std::move(done)(absl::FailedPreconditionError(
        "no Kafka relay runs (start the server with --kafka-brokers): nothing to replay to"));
    return;
  }
  bridge::ReplayRequest r;
  r.from_sequence = request.from_sequence();
  r.to_sequence = request.to_sequence();
  r.topic = request.topic();
  r.max_records_per_second =
      request.max_records_per_second() == 0 ? 10000 : request.max_records_per_second();
  Launch<::admin::v1::ReplayResponse>(
      replay_, "a replay", std::move(done),
      [this, r]() -> absl::StatusOr<::admin::v1::ReplayResponse> {
        const auto began = std::chrono::steady_clock::now();
        auto result = relay_->Replay(r);
        if (!result.ok()) return result.status();
        ::admin::v1::ReplayResponse response;
        response.set_first_sequence(result->first_sequence);
        response.set_last_sequence(result->last_sequence);
        response.set_records_sent(result->records_sent);
        response.set_records_delivered(result->records_delivered);
        response.set_skipped_other_topics(result->skipped_other_topics);
        response.set_duration_ms(MillisSince(began));
        return response;
      });
}

AuditStats StoreOperations::audit_stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

}  // namespace feed::admin

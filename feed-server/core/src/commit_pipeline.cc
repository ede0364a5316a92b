#include "commit_pipeline.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "fmt/format.h"
#include "logging.h"

namespace feed::core {

CommitPipeline::CommitPipeline(storage::Store& store, const Clock& clock,
                               const CoreOptions& options, Stages stages)
    : store_(store),
      clock_(clock),
      options_(options),
      stages_(std::move(stages)),
      eager_apply_commands_(std::max<size_t>(1, options.max_batch_commands / 8)) {
  // The committer turning idle is what a writer waiting to gather commands waits for.
  commit_.set_on_idle([this] {
    bool wake;
    {
      std::lock_guard lock(mu_);
      wake = WriterMayApply();
    }
    if (wake) cv_.notify_one();
  });
}

void CommitPipeline::Start() {
  next_sweep_ms_ = clock_.NowMillis() + options_.sweep_interval_ms;
  auto named = [](const char* name, void (CommitPipeline::*loop)(), CommitPipeline* self) {
    return std::thread([=] {
      pthread_setname_np(pthread_self(), name);
      (self->*loop)();
    });
  };
  writer_ = named("feed-writer", &CommitPipeline::WriterLoop, this);
  committer_ = named("feed-committer", &CommitPipeline::CommitterLoop, this);
  if (options_.replicated_log != nullptr) {
    replicator_ = named("feed-replicator", &CommitPipeline::ReplicatorLoop, this);
  }
  completer_ = named("feed-completer", &CommitPipeline::CompleterLoop, this);
  publisher_ = named("feed-publisher", &CommitPipeline::PublisherLoop, this);
}

void CommitPipeline::Shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // Each stage drains its input and exits; then the next one's input is closed.
  auto join = [](std::thread& t) {
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  };
  join(writer_);
  commit_.Close();
  join(committer_);
  replicate_.Close();
  join(replicator_);
  complete_.Close();
  join(completer_);
  publish_.Close();
  join(publisher_);
}

void CommitPipeline::Enqueue(std::unique_ptr<Command> command) {
  absl::Status reject;
  bool may_apply = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      reject = absl::UnavailableError("the server is shutting down");
    } else if (!failed_.ok()) {
      reject = failed_;
    } else if (queue_.size() >= options_.max_queue_depth) {
      reject = absl::ResourceExhaustedError(fmt::format(
          "writer queue is full ({} commands); retry with backoff", options_.max_queue_depth));
    } else {
      queue_.push_back(std::move(command));
      may_apply = WriterMayApply();
    }
  }
  if (!reject.ok()) {
    command->Fail(std::move(reject));
    return;
  }
  if (may_apply) cv_.notify_one();
}

absl::Status CommitPipeline::health() const {
  std::lock_guard lock(mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  return failed_;
}

size_t CommitPipeline::queue_depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

bool CommitPipeline::WriterMayApply() const {
  return stopping_ ||
         (!queue_.empty() && (commit_.idle() || queue_.size() >= eager_apply_commands_));
}

// Stage 1.
void CommitPipeline::WriterLoop() {
  std::vector<std::unique_ptr<Command>> commands;
  commands.reserve(options_.max_batch_commands);
  while (true) {
    bool stop;
    {
      std::unique_lock lock(mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return WriterMayApply(); };
      if (options_.sweep_interval_ms > 0) {
        const int64_t wait_ms = std::max<int64_t>(0, next_sweep_ms_ - clock_.NowMillis());
        cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), ready);
      } else {
        cv_.wait(lock, ready);
      }
      while (!queue_.empty() && commands.size() < options_.max_batch_commands) {
        commands.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      stop = stopping_ && queue_.empty();
    }
    const bool sweep = options_.sweep_interval_ms > 0 && clock_.NowMillis() >= next_sweep_ms_;
    if (!commands.empty() || sweep) RunBatch(commands, sweep);
    commands.clear();
    if (stop) return;
  }
}

void CommitPipeline::RunBatch(std::vector<std::unique_ptr<Command>>& commands, bool sweep) {
  {
    std::lock_guard lock(mu_);
    if (!failed_.ok()) {
      for (auto& c : commands) c->Fail(failed_);
      return;
    }
  }
  BatchPtr batch = stages_.apply(commands, sweep);
  if (sweep) next_sweep_ms_ = batch->now_ms + options_.sweep_interval_ms;
  // Asked after applying: commands that arrived meanwhile mean load, and then the batch goes
  // to the committer so that the next one is applied while it is written.
  bool commands_waiting;
  {
    std::lock_guard lock(mu_);
    commands_waiting = !queue_.empty();
  }
  // Never in cluster mode: the writer would wait out the log's round trip, and the commands
  // arriving meanwhile with it.
  if (options_.replicated_log == nullptr && !commands_waiting && commit_.idle() &&
      complete_.idle()) {
    std::vector<BatchPtr> alone{std::move(batch)};
    alone.front()->commit_status = Write(alone);
    Complete(alone);
    return;
  }
  commit_.Push(std::move(batch));
}

// Stage 2: every batch waiting, in order, one WAL sync for all of them; then on to the
// completer while the next batches are written.
void CommitPipeline::CommitterLoop() {
  std::vector<BatchPtr> batches;
  while (commit_.PopAll(&batches)) {
    if (options_.replicated_log != nullptr) {
      // Cluster mode: the round leaves for the log, and the committer is free for the next
      // one while the replicator waits (held back once replication_rounds_in_flight wait).
      replicate_.AwaitRoom();  // at most replication_rounds_in_flight rounds on their way
      ReplicationRound round{batches, nullptr, absl::OkStatus(), std::chrono::steady_clock::now()};
      round.status = Prepare(round.batches);
      if (round.status.ok()) round.log_round = StartReplication(round.batches);
      replicate_.Push(std::move(round));
      commit_.Done(batches);
      continue;
    }
    const absl::Status status = Write(batches);
    for (auto& b : batches) b->commit_status = status;
    complete_.PushAll(batches);
    commit_.Done(batches);  // handed on first, so the two never both look idle meanwhile
  }
}

// Stage 2b (cluster mode): each round's confirmation, in the order they were started, then
// its local commit; on to the completer.
void CommitPipeline::ReplicatorLoop() {
  std::vector<ReplicationRound> rounds;
  while (replicate_.PopAll(&rounds)) {
    for (ReplicationRound& round : rounds) {
      absl::Status status = round.status;
      {
        std::lock_guard lock(mu_);
        if (status.ok() && !failed_.ok()) status = failed_;  // an earlier round failed
      }
      if (status.ok()) status = ConfirmReplication(round.batches, round.log_round.get());
      if (status.ok()) status = CommitLocally(round.batches, round.started);
      for (auto& b : round.batches) b->commit_status = status;
      complete_.PushAll(round.batches);
    }
    replicate_.Done(rounds);
  }
}

// Stage 3: the callers of every written batch waiting, in commit order.
void CommitPipeline::CompleterLoop() {
  std::vector<BatchPtr> batches;
  while (complete_.PopAll(&batches)) {
    Complete(batches);
    complete_.Done(batches);
  }
}

// Stage 4: every event of answered commands, in sequence order, in one publication.
void CommitPipeline::PublisherLoop() {
  std::vector<std::vector<EventPtr>> rounds;
  std::vector<EventPtr> events;
  while (publish_.PopAll(&rounds)) {
    events.clear();
    for (const auto& r : rounds) events.insert(events.end(), r.begin(), r.end());
    stages_.publish(events);
    publish_.Done(rounds);
  }
}

absl::Status CommitPipeline::Write(std::vector<BatchPtr>& batches) {
  const auto started = std::chrono::steady_clock::now();
  if (absl::Status s = Prepare(batches); !s.ok()) return s;
  return CommitLocally(batches, started);
}

absl::Status CommitPipeline::Prepare(std::vector<BatchPtr>& batches) {
  {
    std::lock_guard lock(mu_);
    if (!failed_.ok()) return failed_;
  }
  for (const auto& b : batches) {
    if (!b->broken.ok()) return Fail(b->broken);
  }
  if (stages_.seal) {
    for (const auto& b : batches) stages_.seal(*b);
  }
  return absl::OkStatus();
}

std::unique_ptr<ReplicatedLog::Round> CommitPipeline::StartReplication(
    const std::vector<BatchPtr>& batches) {
  std::vector<std::string_view> entries;
  for (const auto& b : batches) {
    if (!b->journal_entry.empty()) entries.push_back(b->journal_entry);
  }
  if (entries.empty()) return nullptr;
  return options_.replicated_log->Start(entries);
}

absl::Status CommitPipeline::ConfirmReplication(const std::vector<BatchPtr>& batches,
                                                ReplicatedLog::Round* round) {
  if (round == nullptr) return absl::OkStatus();
  auto positions = round->Confirmed();
  if (!positions.ok()) return Fail(positions.status());
  std::vector<Batch*> logged;
  for (const auto& b : batches) {
    if (!b->journal_entry.empty()) logged.push_back(b.get());
  }
  if (positions->size() != logged.size()) {
    return Fail(absl::InternalError(fmt::format("replicated log: {} positions for {} entries",
                                                positions->size(), logged.size())));
  }
  for (size_t i = 0; i < logged.size(); ++i) {
    logged[i]->group->Put(storage::Table::kMeta, storage::meta_keys::kShardLogOffset,
                          storage::EncodeSequence(static_cast<uint64_t>((*positions)[i])));
  }
  return absl::OkStatus();
}

// Only the last write syncs the WAL, which makes the earlier ones durable too (group commit
// across batches). A failure fails all of them and, through failed_, everything after.
absl::Status CommitPipeline::CommitLocally(std::vector<BatchPtr>& batches,
                                           std::chrono::steady_clock::time_point started) {
  size_t last_write = batches.size();
  for (size_t i = 0; i < batches.size(); ++i) {
    if (batches[i]->group->Count() > 0) last_write = i;
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    Batch& b = *batches[i];
    if (b.group->Count() == 0) continue;
    // In cluster mode the log holds the batches already: the store need not sync.
    const bool sync = i == last_write && options_.replicated_log == nullptr;
    absl::Status s = store_.Commit(
        *b.group, sync ? storage::CommitMode::kConfigured : storage::CommitMode::kNoSync);
    if (!s.ok()) return Fail(s);
  }
  if (stages_.committed) {
    for (const auto& b : batches) stages_.committed(*b);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (options_.on_batch_committed) {
    size_t commands = 0, events = 0;
    for (const auto& b : batches) {
      commands += b->commands.size();
      events += b->events.size();
    }
    if (commands > 0 || events > 0) options_.on_batch_committed(commands, events, seconds);
  }
  committed_batch_.store(batches.back()->id, std::memory_order_release);
  batches_written_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

// No caller was told these batches succeeded; the in-memory state is ahead of the disk.
absl::Status CommitPipeline::Fail(const absl::Status& cause) {
  CoreLogger()->critical("commit failed, refusing all further commands: {}", cause.ToString());
  absl::Status failed = absl::UnavailableError(
      fmt::format("{} failed ({}); the server must restart",
                  options_.replicated_log != nullptr ? "replication" : "storage commit",
                  std::string(cause.message())));
  std::lock_guard lock(mu_);
  failed_ = failed;
  return failed;
}

// Answers the callers of written batches (or fails them with their commit's error), then
// hands the events of all of them to the publisher at once.
void CommitPipeline::Complete(const std::vector<BatchPtr>& batches) {
  std::vector<EventPtr> events;
  for (const auto& batch : batches) {
    Batch& b = *batch;
    if (!b.commit_status.ok()) {
      for (auto& c : b.commands) c->Fail(b.commit_status);
      b.commands.clear();
      continue;
    }
    commands_completed_.fetch_add(b.commands.size(), std::memory_order_relaxed);
    events_completed_.fetch_add(b.events.size(), std::memory_order_relaxed);
    for (auto& c : b.commands) c->Complete();
    // Freed here rather than with the batch, which the writer drops: the requests are the
    // batch's largest part, and the writer is the stage every command waits for.
    b.commands.clear();
    events.insert(events.end(), b.events.begin(), b.events.end());
  }
  if (!events.empty()) publish_.Push(std::move(events));
}

}  // namespace feed::core

// feedctl check | backup | replay: the AdminService (scope admin). Each can take long on the
// server, so they wait up to --wait-s (not --timeout-ms) and show the time passing on a
// terminal.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"

namespace feedctl {
namespace {

// "check: 12 s..." on stderr once a second while `call` runs, when stderr is a terminal.
template <class Call>
grpc::Status WithElapsed(const char* what, bool show, Call call) {
  if (!show) return call();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  const auto started = std::chrono::steady_clock::now();
  std::thread ticker([&] {
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, std::chrono::seconds(1), [&] { return done; })) {
      const auto s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::steady_clock::now() - started)
                         .count();
      std::fprintf(stderr, "\r%s: %lld s...", what, static_cast<long long>(s));
    }
  });
  grpc::Status status = call();
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_one();
  ticker.join();
  std::fprintf(stderr, "\r\033[K");
  return status;
}

struct AdminArgs {
  int64_t wait_s = 3600;
  uint64_t from_sequence = 0, to_sequence = 0;
  std::string topic;
  uint32_t rate = 0;
  std::string progress = "auto";  // auto | on | off
  uint32_t max_violations = 0;
  int64_t shard = -1;  // cluster mode: only this shard (-1: every shard)
  std::string name;
  bool show() const {
    return progress == "on" || (progress == "auto" && isatty(STDERR_FILENO) != 0);
  }
};

// The shards a command visits: --shard, or every shard of the map (none on a single node).
std::vector<uint32_t> ShardsToVisit(const inventory::v1::GetShardMapResponse& map,
                                    const AdminArgs& a) {
  if (a.shard >= 0) return {static_cast<uint32_t>(a.shard)};
  std::vector<uint32_t> shards;
  for (uint32_t s = 0; s < map.shard_count(); ++s) shards.push_back(s);
  return shards;
}

// The audit's outcome as text; `where` names the shard and node in cluster mode.
std::string DescribeAudit(const admin::v1::CheckStoreResponse& resp, const std::string& where) {
  std::string human = fmt::format(
      "{}store as of sequence {}: {} levels, {} open holds, {} journal entries checked in {} "
      "ms: ",
      where, resp.as_of_sequence(), resp.levels_checked(), resp.holds_checked(),
      resp.journal_entries_checked(), resp.duration_ms());
  human += resp.violation_count() == 0 ? "every invariant holds"
                                       : fmt::format("{} violation(s)", resp.violation_count());
  for (const auto& v : resp.violations()) {
    human += fmt::format("\n  {} {}: {}", v.kind(), v.key(), v.message());
  }
  if (static_cast<uint64_t>(resp.violations_size()) < resp.violation_count()) {
    human += fmt::format("\n  ... and {} more (--max-violations)",
                         resp.violation_count() - resp.violations_size());
  }
  return human;
}

// A single node: its store. Cluster mode (the shard map has shards): every shard (or --shard)
// on its owner, one result each; the exit code is the worst of them.
int Check(Context& ctx, const AdminArgs& a) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  const inventory::v1::GetShardMapResponse map = c->ShardMap();
  admin::v1::CheckStoreRequest req;
  req.set_max_violations(a.max_violations);
  const std::vector<uint32_t> shards = ShardsToVisit(map, a);
  if (shards.empty()) {  // a single node
    admin::v1::CheckStoreResponse resp;
    grpc::Status s = WithElapsed("check", a.show(), [&] {
      return c->admin().CheckStore(c->NewContext(std::chrono::seconds(a.wait_s)).get(), req, &resp);
    });
    if (!s.ok()) return ctx.output().Error("CheckStore", s);
    ctx.output().Print(resp, DescribeAudit(resp, ""));
    return resp.violation_count() == 0 ? kOk : kViolations;
  }
  int exit_code = kOk;
  for (uint32_t shard : shards) {
    Endpoint* owner = &c->OwnerOf(map, shard);
    const std::string node = shard < static_cast<uint32_t>(map.shards_size())
                                 ? map.shards(static_cast<int>(shard)).node_id()
                                 : "?";
    req.set_shard(shard);
    admin::v1::CheckStoreResponse resp;
    const std::string what = fmt::format("check shard {}", shard);
    grpc::Status s = WithElapsed(what.c_str(), a.show(), [&] {
      return owner->admin->CheckStore(c->NewContext(std::chrono::seconds(a.wait_s)).get(), req,
                                      &resp);
    });
    if (!s.ok()) {
      const int code = ctx.output().Error(fmt::format("CheckStore (shard {})", shard), s);
      if (exit_code == kOk || exit_code == kViolations) exit_code = code;
      continue;
    }
    ctx.output().Print(
        resp, DescribeAudit(resp, fmt::format("shard {} on {} ({}{}): ", shard, node,
                                              owner->address, resp.standby() ? ", standby" : "")));
    if (resp.violation_count() > 0 && exit_code == kOk) exit_code = kViolations;
  }
  return exit_code;
}

// The backup's outcome as text; `where` names the shard in cluster mode.
std::string DescribeBackup(const admin::v1::BackupResponse& resp, const std::string& where) {
  uint64_t bytes = 0;
  for (const auto& f : resp.manifest().files()) bytes += f.size();
  std::string human = fmt::format(
      "{}backup of store {} up to sequence {} (relay cursor {}) in {}: {} files, {} bytes, {} ms",
      where, resp.manifest().store_id(), resp.manifest().last_sequence(),
      resp.manifest().relay_cursor(), resp.path(), resp.manifest().files_size(), bytes,
      resp.duration_ms());
  if (resp.manifest().has_shard()) {
    human += fmt::format("; a restored node reads the shard's log from offset {}",
                         resp.manifest().shard_log_next_offset());
  }
  return human;
}

// A single node: its store. Cluster mode: every shard (or --shard) as the node --server names
// holds it (its own shards and its standby copies), all under one name, so that the backup
// restores a whole node (`feed-server --restore-from`); the exit code is the worst of them.
int Backup(Context& ctx, const AdminArgs& a) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  const inventory::v1::GetShardMapResponse map = c->ShardMap();
  admin::v1::BackupRequest req;
  req.set_name(a.name);
  const std::vector<uint32_t> shards = ShardsToVisit(map, a);
  if (shards.empty()) {  // a single node
    admin::v1::BackupResponse resp;
    grpc::Status s = WithElapsed("backup", a.show(), [&] {
      return c->admin().Backup(c->NewContext(std::chrono::seconds(a.wait_s)).get(), req, &resp);
    });
    if (!s.ok()) return ctx.output().Error("Backup", s);
    ctx.output().Print(resp, DescribeBackup(resp, ""));
    return kOk;
  }
  int exit_code = kOk;
  for (uint32_t shard : shards) {
    req.set_shard(shard);
    admin::v1::BackupResponse resp;
    const std::string what = fmt::format("backup shard {}", shard);
    grpc::Status s = WithElapsed(what.c_str(), a.show(), [&] {
      return c->admin().Backup(c->NewContext(std::chrono::seconds(a.wait_s)).get(), req, &resp);
    });
    if (!s.ok()) {
      const int code = ctx.output().Error(fmt::format("Backup (shard {})", shard), s);
      if (exit_code == kOk) exit_code = code;
      continue;
    }
    ctx.output().Print(resp,
                       DescribeBackup(resp, fmt::format("shard {}{}: ", shard,
                                                        resp.standby() ? " (standby copy)" : "")));
  }
  return exit_code;
}

int Replay(Context& ctx, const AdminArgs& a) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  admin::v1::ReplayRequest req;
  req.set_from_sequence(a.from_sequence);
  req.set_to_sequence(a.to_sequence);
  req.set_topic(a.topic);
  req.set_max_records_per_second(a.rate);
  admin::v1::ReplayResponse resp;
  grpc::Status s = WithElapsed("replay", a.show(), [&] {
    return c->admin().Replay(c->NewContext(std::chrono::seconds(a.wait_s)).get(), req, &resp);
  });
  if (!s.ok()) return ctx.output().Error("Replay", s);
  ctx.output().Print(
      resp,
      fmt::format("replayed sequences {}..{}: {} records sent and acknowledged{} in {} ms",
                  resp.first_sequence(), resp.last_sequence(), resp.records_delivered(),
                  resp.skipped_other_topics() > 0
                      ? fmt::format(" ({} of other topics left out)", resp.skipped_other_topics())
                      : std::string(),
                  resp.duration_ms()));
  return kOk;
}

void AddWaitOptions(CLI::App* cmd, AdminArgs& a) {
  cmd->add_option("--wait-s", a.wait_s, "how long to wait for the server's answer")
      ->check(CLI::Range(int64_t{1}, int64_t{24 * 3600}));
  cmd->add_option("--progress", a.progress, "time passing on stderr")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

}  // namespace

void AddAdminCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<AdminArgs>();
  auto* check = app.add_subcommand(
      "check",
      "audit every invariant of the running server's store, in cluster mode each shard's on its "
      "owner (exit 4: violations)");
  check->add_option("--max-violations", a->max_violations, "violations to list (default 100)");
  check->add_option("--shard", a->shard, "cluster mode: only this shard (default: every shard)")
      ->check(CLI::Range(int64_t{0}, int64_t{65535}));
  AddWaitOptions(check, *a);
  check->callback([&ctx, a] { ctx.run = [&ctx, a] { return Check(ctx, *a); }; });

  auto* backup = app.add_subcommand(
      "backup",
      "a consistent copy of the running server's store, into its --backup-dir (in cluster mode "
      "every shard's copy on that node, into <name>/shard-<n>)");
  backup->add_option("--to", a->name, "the backup's folder name under the server's --backup-dir")
      ->required();
  backup
      ->add_option("--shard", a->shard,
                   "cluster mode: only this shard (default: every shard, as the node holds it)")
      ->check(CLI::Range(int64_t{0}, int64_t{65535}));
  AddWaitOptions(backup, *a);
  backup->callback([&ctx, a] { ctx.run = [&ctx, a] { return Backup(ctx, *a); }; });

  auto* replay = app.add_subcommand(
      "replay", "send kept events again to Kafka with their event ids (a consumer re-fed)");
  replay->add_option("--from-sequence", a->from_sequence, "the first event to send")->required();
  replay->add_option("--to-sequence", a->to_sequence, "the last one (default: the last)");
  replay->add_option("--topic", a->topic, "only the events of this topic");
  replay->add_option("--rate", a->rate, "records per second at most (default 10000)");
  AddWaitOptions(replay, *a);
  replay->callback([&ctx, a] { ctx.run = [&ctx, a] { return Replay(ctx, *a); }; });
}

}  // namespace feedctl

// feedctl stock watch: a WatchStock stream drawn as a live table (watch_table.h), redrawn at
// most ten times a second; with --json one line per update instead. A dropped stream is
// resumed from the last sequence received (a fresh snapshot when the server no longer
// retains it), so the table never misses a change. In cluster mode one stream per shard (of
// the named SKUs, or every shard's levels), each on the node that owns the shard now (the one
// a closing `feed-shard-owner` names). Ctrl-C ends it (exit 0).
#include <grpcpp/grpcpp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "interrupt.h"
#include "stock_streams.h"
#include "watch_table.h"

namespace feedctl {
namespace {

int TerminalRows() {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_row > 4) return w.ws_row - 4;
  return 40;
}

// One stream the table follows, and what it is doing.
struct Follow {
  StockStream stream;
  std::string status = "connecting";  // guarded by RunWatch's mu
};

}  // namespace

int RunWatch(Context& ctx, const std::vector<std::string>& skus, const std::string& location,
             bool once) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  CancelOnInterrupt interrupt;
  const bool tty = isatty(STDOUT_FILENO) != 0;
  std::vector<Follow> follows;
  for (StockStream& stream : PlanStockStreams(*c, skus)) follows.push_back({std::move(stream)});
  const std::string title = fmt::format(
      "feedctl stock watch {}  {}",
      skus.empty() ? "(every level)" : fmt::format("{}", fmt::join(skus, " ")),
      follows.size() > 1 ? fmt::format("{} ({} shards)", c->options().server, follows.size())
                         : c->options().server);

  WatchTable table;
  std::mutex mu;  // table, statuses and output, between the readers and the drawing loop
  std::atomic<int> exit_code{kOk};

  // Follows one stream until interrupted, a lasting error, or (--once) its snapshot's end.
  auto follow = [&](Follow& f) {
    uint64_t resume_after = 0;
    bool snapshot_on_gap = false;
    auto backoff = std::chrono::milliseconds(200);
    int hops = 0;  // owner changes followed since the last update read
    auto set_status = [&](std::string status) {
      std::lock_guard lock(mu);
      f.status = std::move(status);
    };
    while (!interrupt.Stopping()) {
      inventory::v1::WatchStockRequest req = f.stream.Request(location);
      req.set_resume_after_sequence(resume_after);
      req.set_snapshot_on_gap(snapshot_on_gap);
      auto context = f.stream.NewContext(*c);
      interrupt.Watch(context.get());
      auto stream = f.stream.at->inventory->WatchStock(context.get(), req);
      inventory::v1::StockUpdate update;
      bool snapshot_read = false;
      while (!interrupt.Stopping() && stream->Read(&update)) {
        backoff = std::chrono::milliseconds(200);
        hops = 0;
        std::lock_guard lock(mu);
        if (update.kind() == inventory::v1::StockUpdate::KIND_SNAPSHOT_END) {
          f.status = "live";
          if (once) {
            snapshot_read = true;
            context->TryCancel();
            break;
          }
          continue;
        }
        if (update.has_level()) {
          table.Apply(update.level());
          if (ctx.json) ctx.output().Line(ToJson(update));
        }
        resume_after = std::max(resume_after, update.sequence());
        if (resume_after > 0 && f.status != "live" &&
            update.kind() == inventory::v1::StockUpdate::KIND_CHANGE) {
          f.status = "live";
        }
      }
      grpc::Status s = stream->Finish();
      interrupt.Unwatch(context.get());
      if (snapshot_read || interrupt.Stopping()) return;
      if (const std::string owner = ShardOwnerNamedBy(s, *context);
          !owner.empty() && owner != f.stream.at->address && hops++ < kMaxOwnerHops) {
        f.stream.at = &c->At(owner);  // the shard moved (or was never here): resume on its owner
        set_status(fmt::format("following the shard to {} from sequence {}", owner, resume_after));
        continue;
      }
      if (s.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
        // What we missed is no longer retained: start again from a fresh snapshot.
        snapshot_on_gap = true;
        continue;
      }
      // A server going down ends streams with UNAVAILABLE, or CANCELLED for a call that came
      // in during its shutdown: both are worth another try.
      if (ExitFor(s) != kUnavailable && s.error_code() != grpc::StatusCode::CANCELLED && !s.ok()) {
        std::lock_guard lock(mu);
        exit_code = ctx.output().Error(
            f.stream.shard ? fmt::format("WatchStock (shard {})", *f.stream.shard) : "WatchStock",
            s);
        interrupt.Stop();  // the table would be incomplete: end the other streams too
        return;
      }
      set_status(
          fmt::format("reconnecting ({}) from sequence {}", s.error_message(), resume_after));
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
  };
  std::atomic<size_t> running{follows.size()};
  std::vector<std::thread> readers;
  for (Follow& f : follows) {
    readers.emplace_back([&, f = &f] {
      follow(*f);
      --running;
    });
  }

  // "live" once every stream is; else what the first that is not says.
  auto status_line = [&] {
    for (const Follow& f : follows) {
      if (f.status == "live") continue;
      return f.stream.shard && follows.size() > 1
                 ? fmt::format("shard {}: {}", *f.stream.shard, f.status)
                 : f.status;
    }
    return std::string("live");
  };
  std::string drawn;
  while (running > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (ctx.json || once) continue;
    std::string screen;
    {
      std::lock_guard lock(mu);
      screen = table.Render(fmt::format("{}  [{}]", title, status_line()), TerminalRows(), tty);
    }
    if (screen == drawn) continue;
    drawn = screen;
    // Home and clear, then the table: a full redraw keeps a resized terminal right.
    std::fputs(tty ? "\x1b[H\x1b[2J" : "\n", stdout);
    std::fputs(screen.c_str(), stdout);
    std::fflush(stdout);
  }
  for (auto& r : readers) r.join();
  if (once && !ctx.json) std::fputs(table.Render(title, 1 << 30, false).c_str(), stdout);
  return exit_code;
}

}  // namespace feedctl

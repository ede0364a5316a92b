// feedctl stock watch: a WatchStock stream drawn as a live table (watch_table.h), redrawn at
// most ten times a second; with --json one line per update instead. A dropped stream is
// resumed from the last sequence received (a fresh snapshot when the server no longer
// retains it), so the table never misses a change; in cluster mode on the node that owns the
// SKUs' shard now (the one a closing `feed-shard-owner` names). Ctrl-C ends it (exit 0).
#include <grpcpp/grpcpp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "interrupt.h"
#include "watch_table.h"

namespace feedctl {
namespace {

int TerminalRows() {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_row > 4) return w.ws_row - 4;
  return 40;
}

}  // namespace

int RunWatch(Context& ctx, const std::vector<std::string>& skus, const std::string& location,
             bool once) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  CancelOnInterrupt interrupt;
  const bool tty = isatty(STDOUT_FILENO) != 0;
  const std::string title =
      fmt::format("feedctl stock watch {}  {}",
                  skus.empty() ? "(every level)" : fmt::format("{}", fmt::join(skus, " ")),
                  c->options().server);

  WatchTable table;
  std::mutex mu;  // table and status, between the reader and the drawing loop
  std::string status = "connecting";
  std::atomic<bool> stream_done{false};
  std::atomic<int> exit_code{kOk};
  std::atomic<bool> stop_reading{false};  // --once: the snapshot is complete

  std::thread reader([&] {
    uint64_t resume_after = 0;
    bool snapshot_on_gap = false;
    auto backoff = std::chrono::milliseconds(200);
    Endpoint* to = &c->primary();
    int hops = 0;  // owner changes followed since the last update read
    while (!stop_reading && !CancelOnInterrupt::Interrupted()) {
      inventory::v1::WatchStockRequest req;
      for (const auto& s : skus) {
        auto* k = req.add_keys();
        k->set_sku(s);
        k->set_location(location);
      }
      req.set_resume_after_sequence(resume_after);
      req.set_snapshot_on_gap(snapshot_on_gap);
      auto context = c->NewContext(/*streaming=*/true);
      interrupt.Watch(context.get());
      auto stream = to->inventory->WatchStock(context.get(), req);
      inventory::v1::StockUpdate update;
      while (!CancelOnInterrupt::Interrupted() && stream->Read(&update)) {
        backoff = std::chrono::milliseconds(200);
        hops = 0;
        std::lock_guard lock(mu);
        if (update.kind() == inventory::v1::StockUpdate::KIND_SNAPSHOT_END) {
          status = "live";
          if (once) {
            stop_reading = true;
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
        if (resume_after > 0 && status != "live" &&
            update.kind() == inventory::v1::StockUpdate::KIND_CHANGE) {
          status = "live";
        }
      }
      interrupt.Watch(nullptr);
      grpc::Status s = stream->Finish();
      if (stop_reading || CancelOnInterrupt::Interrupted()) break;
      if (const std::string owner = ShardOwnerNamedBy(s, *context);
          !owner.empty() && owner != to->address && hops++ < kMaxOwnerHops) {
        to = &c->At(owner);  // the shard moved (or was never here): resume on its owner
        std::lock_guard lock(mu);
        status = fmt::format("following the shard to {} from sequence {}", owner, resume_after);
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
        exit_code = ctx.output().Error("WatchStock", s);
        break;
      }
      {
        std::lock_guard lock(mu);
        status = fmt::format("reconnecting ({}) from sequence {}", s.error_message(), resume_after);
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
    stream_done = true;
  });

  std::string drawn;
  while (!stream_done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (ctx.json || once) continue;
    std::string screen;
    {
      std::lock_guard lock(mu);
      screen = table.Render(fmt::format("{}  [{}]", title, status), TerminalRows(), tty);
    }
    if (screen == drawn) continue;
    drawn = screen;
    // Home and clear, then the table: a full redraw keeps a resized terminal right.
    std::fputs(tty ? "\x1b[H\x1b[2J" : "\n", stdout);
    std::fputs(screen.c_str(), stdout);
    std::fflush(stdout);
  }
  reader.join();
  if (once && !ctx.json) std::fputs(table.Render(title, 1 << 30, false).c_str(), stdout);
  return exit_code;
}

}  // namespace feedctl

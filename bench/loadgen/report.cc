#include "report.h"

#include <unistd.h>

namespace feed::loadgen {

nlohmann::json CodesJson(const std::array<uint64_t, kNumCodes>& codes, bool skip_ok) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumCodes; ++i) {
    if (codes[i] == 0 || (skip_ok && i == 0)) continue;
    j[CodeName(i)] = codes[i];
  }
  return j;
}

void Report(const Shared& sh, const RunFigures& run, FILE* report) {
  const Options& opt = sh.opt;
  uint64_t all = 0;
  for (auto c : run.total.codes) all += c;
  const uint64_t ok = run.total.codes[0];
  const uint64_t sold_out = sh.business_precondition ? run.total.codes[9] : 0;
  const uint64_t errors = all - ok - sold_out;
  Histogram valid;
  valid.Merge(run.total.ok_latency);
  valid.Merge(run.total.sold_out_latency);
  const double dur = opt.duration_s;
  const double cpu_user = run.cpu1.user - run.cpu0.user, cpu_sys = run.cpu1.sys - run.cpu0.sys;
  auto errors_by_code = run.total.codes;
  errors_by_code[0] = 0;
  if (sh.business_precondition) errors_by_code[9] = 0;

  const char* mode = sh.open_loop ? "open" : "closed";
  std::fprintf(report,
               "%s %s loop, %s, %d thread(s), %d channel(s), %s, %.1f s (+%.1f s warm-up)\n",
               opt.scenario_name.c_str(), mode, opt.target.c_str(), opt.threads, opt.channels,
               sh.open_loop ? fmt::format("rate {:.0f}/s", opt.rate).c_str()
               : opt.scenario == Scenario::kFeed
                   ? fmt::format("{} streams x {} in flight", opt.streams, opt.inflight).c_str()
                   : fmt::format("concurrency {}", opt.concurrency).c_str(),
               dur, opt.warmup_s);
  std::fprintf(report, "  results   %llu (%.0f/s): ok %llu, sold out %llu, errors %llu %s\n",
               static_cast<unsigned long long>(all), static_cast<double>(all) / dur,
               static_cast<unsigned long long>(ok), static_cast<unsigned long long>(sold_out),
               static_cast<unsigned long long>(errors),
               CodesJson(errors_by_code, true).dump().c_str());
  if (sh.open_loop) {
    std::fprintf(report,
                 "  intended  %.0f/s; sent late for lack of capacity (backlog) %llu, still unsent "
                 "at the end %llu\n",
                 opt.rate, static_cast<unsigned long long>(run.total.backlogged),
                 static_cast<unsigned long long>(run.total.unsent));
  }
  auto line = [&](const char* name, const Histogram& h) {
    if (h.count() == 0) return;
    std::fprintf(report, "  %-9s ms: p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (n=%llu)\n", name,
                 FmtMs(h.Percentile(50)).c_str(), FmtMs(h.Percentile(90)).c_str(),
                 FmtMs(h.Percentile(99)).c_str(), FmtMs(h.Percentile(99.9)).c_str(),
                 FmtMs(h.max()).c_str(), static_cast<unsigned long long>(h.count()));
  };
  line("latency", valid);
  line("ok", run.total.ok_latency);
  line("sold-out", run.total.sold_out_latency);
  line("sched-lag", run.total.schedule_lag);
  if (opt.scenario == Scenario::kFeed) {
    std::fprintf(report, "  feed      streams started %d/%d, commands lost %llu, unmatched %llu\n",
                 sh.feed_started.load(), opt.streams,
                 static_cast<unsigned long long>(run.total.feed_lost),
                 static_cast<unsigned long long>(run.total.feed_unmatched));
  }
  if (opt.scenario == Scenario::kWatch) {
    std::fprintf(
        report,
        "  watch     subscribers %d: started %d, connected %d at start (%.2f s), %d at "
        "the end; changes %llu (%llu in window, %.0f/s), snapshot rows %llu, conflated %llu\n",
        opt.subscribers, run.subs_started_at_start, run.subs_connected_at_start, run.connect_s,
        run.subs_connected_at_end, static_cast<unsigned long long>(run.total.watch_changes),
        static_cast<unsigned long long>(run.total.watch_changes_in_window),
        static_cast<double>(run.total.watch_changes_in_window) / dur,
        static_cast<unsigned long long>(run.total.watch_snapshot),
        static_cast<unsigned long long>(run.total.watch_conflated));
    line("watch-lag", run.total.watch_lag);
  }
  uint64_t stream_errs = 0;
  for (int i = 0; i < kNumCodes; ++i) stream_errs += run.total.stream_end_codes[i];
  if (stream_errs) {
    std::fprintf(report, "  streams ended by the server: %s\n",
                 CodesJson(run.total.stream_end_codes, false).dump().c_str());
  }
  std::fprintf(report, "  loadgen   cpu %.2f s user + %.2f s sys = %.2f cores\n", cpu_user, cpu_sys,
               (cpu_user + cpu_sys) / dur);
  // Server and machine CPU over the measured window (--server-pid); "others" is everything
  // else on the machine (other processes): a disturbed run when it is large.
  const double server_cores = run.proc0.process >= 0 && run.proc1.process >= 0
                                  ? (run.proc1.process - run.proc0.process) / dur
                                  : -1;
  const double machine_cores =
      run.proc0.machine_idle >= 0
          ? static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)) -
                (run.proc1.machine_idle - run.proc0.machine_idle) /
                    std::chrono::duration<double>(run.proc1.at - run.proc0.at).count()
          : -1;
  const double others_cores =
      server_cores >= 0 ? machine_cores - server_cores - (cpu_user + cpu_sys) / dur : -1;
  if (server_cores >= 0) {
    std::fprintf(
        report,
        "  server    cpu %.2f cores (%.1f us per result); machine busy %.2f cores, others %.2f\n",
        server_cores, all ? server_cores * dur / static_cast<double>(all) * 1e6 : 0.0,
        machine_cores, others_cores);
  }

  if (opt.json) {
    nlohmann::json j;
    j["scenario"] = opt.scenario_name;
    j["mode"] = mode;
    j["target"] = opt.target;
    j["threads"] = opt.threads;
    j["channels"] = opt.channels;
    if (sh.open_loop) {
      j["rate"] = opt.rate;
    } else if (opt.scenario == Scenario::kFeed) {
      j["in_flight"] = opt.streams * opt.inflight;
      j["feed_batch"] = opt.feed_batch;
    } else {
      j["concurrency"] = opt.concurrency;
    }
    j["duration_s"] = dur;
    j["warmup_s"] = opt.warmup_s;
    j["results"] = all;
    j["ok"] = ok;
    j["sold_out"] = sold_out;
    j["errors"] = errors;
    j["errors_by_code"] = CodesJson(errors_by_code, true);
    j["throughput"] = std::round(static_cast<double>(ok + sold_out) / dur * 10) / 10;
    j["ok_throughput"] = std::round(static_cast<double>(ok) / dur * 10) / 10;
    j["latency_us"] = valid.Json();
    j["ok_latency_us"] = run.total.ok_latency.Json();
    j["sold_out_latency_us"] = run.total.sold_out_latency.Json();
    if (sh.open_loop) {
      j["unsent"] = run.total.unsent;
      j["backlogged"] = run.total.backlogged;
      j["schedule_lag_us"] = run.total.schedule_lag.Json();
    }
    j["warmup_results"] = run.total.warmup_calls;
    j["seed"] = run.seed;
    if (opt.scenario == Scenario::kFeed) {
      j["feed"] = {{"streams", opt.streams},
                   {"inflight_per_stream", opt.inflight},
                   {"streams_started", sh.feed_started.load()},
                   {"lost", run.total.feed_lost},
                   {"unmatched", run.total.feed_unmatched}};
    }
    if (opt.scenario == Scenario::kWatch) {
      j["watch"] = {{"subscribers", opt.subscribers},
                    {"filter", opt.watch_filter},
                    {"started", run.subs_started_at_start},
                    {"connected_at_start", run.subs_connected_at_start},
                    {"connected_at_end", run.subs_connected_at_end},
                    {"run.connect_s", std::round(run.connect_s * 1000) / 1000},
                    {"changes", run.total.watch_changes},
                    {"changes_in_window", run.total.watch_changes_in_window},
                    {"changes_per_s",
                     std::round(static_cast<double>(run.total.watch_changes_in_window) / dur)},
                    {"snapshot_rows", run.total.watch_snapshot},
                    {"conflated", run.total.watch_conflated},
                    {"negative_lag", run.total.watch_negative_lag},
                    {"lag_us", run.total.watch_lag.Json()}};
    }
    j["streams_ended_by_server"] = CodesJson(run.total.stream_end_codes, false);
    j["loadgen_cpu"] = {{"user_s", std::round(cpu_user * 1000) / 1000},
                        {"sys_s", std::round(cpu_sys * 1000) / 1000},
                        {"cores", std::round((cpu_user + cpu_sys) / dur * 1000) / 1000}};
    if (server_cores >= 0) {
      j["server_cpu_cores"] = std::round(server_cores * 1000) / 1000;
      j["machine_busy_cores"] = std::round(machine_cores * 1000) / 1000;
      j["others_cpu_cores"] = std::round(others_cores * 1000) / 1000;
    }
    std::printf("%s\n", j.dump().c_str());
  }
}

}  // namespace feed::loadgen

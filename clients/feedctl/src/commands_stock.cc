// feedctl stock get|adjust|import|export (watch: watch.cc).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "import_plan.h"
#include "nlohmann/json.hpp"
#include "stock_csv.h"
#include "stock_streams.h"

namespace feedctl {

using inventory::v1::AdjustStockRequest;
using inventory::v1::AdjustStockResponse;

namespace {

int GetStock(Context& ctx, const std::vector<std::string>& skus, const std::string& location,
             uint64_t as_of) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  inventory::v1::GetStockRequest req;
  req.set_as_of_sequence(as_of);
  for (const auto& s : skus) {
    auto* k = req.add_keys();
    k->set_sku(s);
    k->set_location(location);
  }
  inventory::v1::GetStockResponse resp;
  grpc::Status status = c->Unary(&inventory::v1::InventoryService::Stub::GetStock, req, &resp);
  if (!status.ok()) return ctx.output().Error("GetStock", status);
  std::string human;
  for (const auto& l : resp.levels()) human += (human.empty() ? "" : "\n") + Describe(l);
  for (const auto& k : resp.missing()) {
    human += fmt::format("{}{} @ {}: no stock level", human.empty() ? "" : "\n", k.sku(),
                         k.location().empty() ? "(any)" : k.location());
  }
  ctx.output().Print(resp, human);
  return kOk;
}

struct AdjustArgs {
  std::string sku, location, reason, key;
  int64_t quantity = 0;
  bool set = false;
  std::string backorder;  // "", "true", "false"
};

int Adjust(Context& ctx, const AdjustArgs& a) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  AdjustStockRequest req;
  req.set_sku(a.sku);
  req.set_location(a.location);
  req.set_mode(a.set ? inventory::v1::ADJUST_MODE_SET : inventory::v1::ADJUST_MODE_DELTA);
  req.set_quantity(a.quantity);
  req.set_reason(a.reason);
  req.set_idempotency_key(a.key);
  if (!a.backorder.empty()) req.set_allow_backorder(a.backorder == "true");
  AdjustStockResponse resp;
  grpc::Status status = c->Unary(&inventory::v1::InventoryService::Stub::AdjustStock, req, &resp);
  if (!status.ok()) return ctx.output().Error("AdjustStock", status);
  ctx.output().Print(resp, Describe(resp.level()) + (resp.replayed() ? " (replayed)" : ""));
  return kOk;
}

// Progress on stderr: one line rewritten in place (only on a terminal, unless forced).
class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), enabled_(enabled) {}
  void Update(size_t done, size_t failed, bool force = false) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const int width = 30;
    const int filled = total_ == 0 ? width : static_cast<int>(done * width / total_);
    std::fprintf(stderr, "\r[%s%s] %zu/%zu lines, %zu failed, %.0f lines/s ",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), done,
                 total_, failed, seconds > 0 ? static_cast<double>(done) / seconds : 0.0);
    if (done == total_) std::fputc('\n', stderr);
  }

 private:
  size_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

struct ImportArgs {
  std::string file, mode = "set", import_id, reason = "csv import", errors_file;
  int batch = 500;
  int window = 4;
  bool skip_invalid = false;
  std::string progress = "auto";  // auto | on | off
};

int Import(Context& ctx, const ImportArgs& a) {
  std::ifstream in(a.file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "feedctl: stock import: cannot read '%s'\n", a.file.c_str());
    return kUsage;
  }
  std::stringstream text;
  text << in.rdbuf();
  const auto mode =
      a.mode == "delta" ? inventory::v1::ADJUST_MODE_DELTA : inventory::v1::ADJUST_MODE_SET;
  const std::string import_id =
      a.import_id.empty() ? std::filesystem::path(a.file).filename().string() : a.import_id;
  ParsedStockCsv parsed = ParseStockCsv(text.str(), mode, import_id, a.reason);

  struct Failure {
    int line;
    std::string code, message;
  };
  std::vector<Failure> failures;
  for (const auto& p : parsed.problems) failures.push_back({p.line, "INVALID_LINE", p.message});
  auto report = [&] {
    std::FILE* out = stderr;
    std::FILE* file = nullptr;
    if (!a.errors_file.empty() && (file = std::fopen(a.errors_file.c_str(), "w")) != nullptr) {
      out = file;
      std::fprintf(out, "line,code,message\n");
    }
    for (const auto& f : failures) {
      if (file != nullptr) {
        std::fprintf(out, "%d,%s,%s\n", f.line, f.code.c_str(), CsvField(f.message).c_str());
      } else {
        std::fprintf(out, "feedctl: %s line %d: %s: %s\n", a.file.c_str(), f.line, f.code.c_str(),
                     f.message.c_str());
      }
    }
    if (file != nullptr) std::fclose(file);
  };
  if (!parsed.problems.empty() && (!a.skip_invalid || parsed.adjustments.empty())) {
    report();
    std::fprintf(stderr,
                 "feedctl: stock import: %zu invalid line(s) in %s; nothing was sent (fix them, or "
                 "--skip-invalid to import the others)\n",
                 parsed.problems.size(), a.file.c_str());
    return kUsage;
  }

  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  // In cluster mode each batch holds one shard's lines and goes to its owner.
  const inventory::v1::GetShardMapResponse shard_map = c->ShardMap();
  const std::vector<ImportBatch> batches = PlanImportBatches(
      parsed.adjustments, shard_map.shard_count(), static_cast<size_t>(std::max(1, a.batch)));

  // Up to `window` BatchAdjustStock calls in flight on one completion queue; each line is
  // applied or refused on its own. A batch answered by a node that no longer serves its shard
  // did nothing there, and is sent again to the owner it names.
  grpc::CompletionQueue cq;
  struct Call {
    const ImportBatch* batch;
    Endpoint* to;
    int hops = 0;
    inventory::v1::BatchAdjustStockRequest request;
    std::unique_ptr<grpc::ClientContext> context;
    inventory::v1::BatchAdjustStockResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inventory::v1::BatchAdjustStockResponse>>
        reader;
  };
  const size_t total = parsed.adjustments.size();
  const bool show = a.progress == "on" || (a.progress == "auto" && isatty(STDERR_FILENO) != 0);
  Progress progress(total, show);
  size_t next = 0, done = 0, changed = 0, replayed = 0, unavailable = 0;
  std::vector<std::unique_ptr<Call>> pending;
  auto send = [&](Call* call) {
    call->context = c->NewContext();
    call->response.Clear();
    call->reader =
        call->to->inventory->AsyncBatchAdjustStock(call->context.get(), call->request, &cq);
    call->reader->Finish(&call->response, &call->status, call);
  };
  auto start = [&] {
    auto call = std::make_unique<Call>();
    call->batch = &batches[next++];
    call->to = &c->OwnerOf(shard_map, call->batch->shard);
    for (size_t index : call->batch->lines) {
      *call->request.add_adjustments() = parsed.adjustments[index].request;
    }
    send(call.get());
    pending.push_back(std::move(call));
  };
  const size_t window = static_cast<size_t>(std::max(1, a.window));
  while (next < batches.size() && pending.size() < window) start();
  void* tag = nullptr;
  bool ok = false;
  while (!pending.empty() && cq.Next(&tag, &ok)) {
    auto* call = static_cast<Call*>(tag);
    const std::string owner = ShardOwnerNamedBy(call->status, *call->context);
    if (!owner.empty() && owner != call->to->address && call->hops < kMaxOwnerHops) {
      ++call->hops;
      call->to = &c->At(owner);
      send(call);
      continue;
    }
    const auto& lines = call->batch->lines;
    done += lines.size();
    for (size_t i = 0; i < lines.size(); ++i) {
      const int line = parsed.adjustments[lines[i]].line;
      if (!call->status.ok()) {
        failures.push_back(
            {line, StatusCodeName(call->status.error_code()), call->status.error_message()});
        continue;
      }
      if (static_cast<int>(i) >= call->response.results_size()) {
        failures.push_back({line, "INTERNAL", "no result for this line in the server's answer"});
        continue;
      }
      const auto& result = call->response.results(static_cast<int>(i));
      if (result.code() == 0) {
        ++(result.response().replayed() ? replayed : changed);
      } else {
        // The server names the item by its place in the batch; the line says where it is.
        std::string message = result.message();
        if (size_t colon = message.find(": ");
            message.rfind("adjustments[", 0) == 0 && colon != std::string::npos) {
          message = message.substr(colon + 2);
        }
        failures.push_back(
            {line, StatusCodeName(static_cast<grpc::StatusCode>(result.code())), message});
      }
    }
    if (ExitFor(call->status) == kUnavailable) ++unavailable;
    pending.erase(std::find_if(pending.begin(), pending.end(),
                               [call](const auto& p) { return p.get() == call; }));
    // An unreachable server: stop sending; a re-run continues where this one stopped.
    if (unavailable == 0) {
      while (next < batches.size() && pending.size() < window) start();
    }
    progress.Update(done, failures.size(), done == total);
  }
  std::sort(failures.begin(), failures.end(),
            [](const Failure& x, const Failure& y) { return x.line < y.line; });
  report();
  const size_t not_sent = total - done;
  if (ctx.json) {
    ctx.output().Line(nlohmann::json{
        {"file", a.file},
        {"lines", total},
        {"applied", changed},
        {"replayed", replayed},
        {"failed", failures.size()},
        {"not_sent",
         not_sent}}.dump());
  } else {
    std::fprintf(stderr,
                 "feedctl: %s: %zu lines: %zu applied, %zu already applied before (replayed), "
                 "%zu failed%s\n",
                 a.file.c_str(), total, changed, replayed, failures.size(),
                 not_sent > 0 ? fmt::format(", {} not sent (server unavailable: run the same "
                                            "command again to continue)",
                                            not_sent)
                                    .c_str()
                              : "");
  }
  if (unavailable > 0) return kUnavailable;
  return failures.empty() ? kOk : kRejected;
}

// Every level (or those of `skus`): a WatchStock snapshot read to its end, then the stream is
// cancelled. One consistent cut, however many levels; in cluster mode one cut per shard, each
// read on the shard's owner (every SKU of a shard: metadata feed-shard).
int Export(Context& ctx, const std::vector<std::string>& skus, const std::string& location,
           const std::string& file) {
  Connection* c = ctx.Connect();
  if (c == nullptr) return kUsage;
  const std::vector<StockStream> cuts = PlanStockStreams(*c, skus);
  std::FILE* out = stdout;
  if (!file.empty() && (out = std::fopen(file.c_str(), "w")) == nullptr) {
    std::fprintf(stderr, "feedctl: stock export: cannot write '%s'\n", file.c_str());
    return kUsage;
  }
  std::fprintf(out, "%s\n", StockCsvHeader().c_str());
  size_t rows = 0;
  std::vector<std::string> sequences;
  for (const StockStream& cut : cuts) {
    auto context = cut.NewContext(*c);
    auto reader = cut.at->inventory->WatchStock(context.get(), cut.Request(location));
    inventory::v1::StockUpdate update;
    bool complete = false;
    while (reader->Read(&update)) {
      if (update.kind() == inventory::v1::StockUpdate::KIND_SNAPSHOT_END) {
        complete = true;
        break;
      }
      std::fprintf(out, "%s\n", StockCsvRow(update.level()).c_str());
      ++rows;
    }
    context->TryCancel();
    grpc::Status status = reader->Finish();
    if (!complete) {
      if (out != stdout) std::fclose(out);
      return ctx.output().Error(
          cut.shard ? fmt::format("WatchStock (export of shard {})", *cut.shard)
                    : std::string("WatchStock (export)"),
          status.ok()
              ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended before the snapshot")
              : status);
    }
    sequences.push_back(cut.shard ? fmt::format("shard {} at {}", *cut.shard, update.sequence())
                                  : fmt::format("{}", update.sequence()));
  }
  if (out != stdout) std::fclose(out);
  std::fprintf(stderr, "feedctl: exported %zu levels (sequence %s)\n", rows,
               fmt::format("{}", fmt::join(sequences, ", ")).c_str());
  return kOk;
}

}  // namespace

int RunWatch(Context& ctx, const std::vector<std::string>& skus, const std::string& location,
             bool once);  // watch.cc

void AddStockCommands(CLI::App& app, Context& ctx) {
  CLI::App* stock = app.add_subcommand("stock", "stock levels: get, adjust, watch, import, export");
  stock->require_subcommand(1);

  auto* get = stock->add_subcommand("get", "stock levels of SKUs (all locations, or --location)");
  auto skus = std::make_shared<std::vector<std::string>>();
  auto location = std::make_shared<std::string>();
  get->add_option("sku", *skus, "SKUs")->required();
  get->add_option("--location", *location, "one location (default: every location)");
  auto as_of = std::make_shared<uint64_t>(0);
  get->add_option("--as-of", *as_of, "as right after this sequence (from the kept events)");
  get->callback([&ctx, skus, location, as_of] {
    ctx.run = [&ctx, skus, location, as_of] { return GetStock(ctx, *skus, *location, *as_of); };
  });

  auto* adjust = stock->add_subcommand("adjust", "receive, correct or count stock");
  auto a = std::make_shared<AdjustArgs>();
  adjust->add_option("sku", a->sku, "SKU")->required();
  adjust
      ->add_option("quantity", a->quantity,
                   "units to add (or remove, negative); with --set the new on-hand")
      ->required();
  adjust->add_flag("--set", a->set, "quantity is the new on-hand (a count), not a change");
  adjust->add_option("--location", a->location, "location (default: the server's)");
  adjust->add_option("--reason", a->reason, "why (recorded in the event)");
  adjust->add_option("--key", a->key, "idempotency key (a retry with it applies nothing twice)");
  adjust->add_option("--backorder", a->backorder, "allow reservations beyond on-hand")
      ->check(CLI::IsMember({"true", "false"}));
  adjust->callback([&ctx, a] { ctx.run = [&ctx, a] { return Adjust(ctx, *a); }; });

  auto* watch = stock->add_subcommand("watch", "a live table of stock levels (every change)");
  auto wskus = std::make_shared<std::vector<std::string>>();
  auto wlocation = std::make_shared<std::string>();
  auto once = std::make_shared<bool>(false);
  watch->add_option("sku", *wskus, "SKUs (default: every level)");
  watch->add_option("--location", *wlocation, "one location");
  watch->add_flag("--once", *once, "print the snapshot and exit");
  watch->callback([&ctx, wskus, wlocation, once] {
    ctx.run = [&ctx, wskus, wlocation, once] { return RunWatch(ctx, *wskus, *wlocation, *once); };
  });

  auto* import_cmd = stock->add_subcommand(
      "import", "adjust stock from a CSV file: sku,location,quantity[,reason] (header row)");
  auto i = std::make_shared<ImportArgs>();
  import_cmd->add_option("file", i->file, "CSV file")->required();
  import_cmd->add_option("--mode", i->mode, "set: quantities are counts; delta: changes")
      ->check(CLI::IsMember({"set", "delta"}))
      ->capture_default_str();
  import_cmd->add_option("--reason", i->reason, "reason for lines without one")
      ->capture_default_str();
  import_cmd->add_option("--import-id", i->import_id,
                         "names the import in the idempotency keys (default: the file name)");
  import_cmd
      ->add_option("--batch", i->batch,
                   "lines per call (at most the server's --max-batch-adjustments)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  import_cmd->add_option("--window", i->window, "calls in flight")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  import_cmd->add_flag("--skip-invalid", i->skip_invalid,
                       "import the valid lines of a file with invalid ones");
  import_cmd->add_option("--errors", i->errors_file,
                         "write the failed lines as CSV (line,code,message)");
  import_cmd->add_option("--progress", i->progress, "progress bar on stderr")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  import_cmd->callback([&ctx, i] { ctx.run = [&ctx, i] { return Import(ctx, *i); }; });

  auto* exp = stock->add_subcommand("export", "every stock level (or those of SKUs) as CSV");
  auto eskus = std::make_shared<std::vector<std::string>>();
  auto elocation = std::make_shared<std::string>();
  auto efile = std::make_shared<std::string>();
  exp->add_option("sku", *eskus, "SKUs (default: every level)");
  exp->add_option("--location", *elocation, "one location");
  exp->add_option("--output,-o", *efile, "file (default: stdout)");
  exp->callback([&ctx, eskus, elocation, efile] {
    ctx.run = [&ctx, eskus, elocation, efile] { return Export(ctx, *eskus, *elocation, *efile); };
  });
}

}  // namespace feedctl

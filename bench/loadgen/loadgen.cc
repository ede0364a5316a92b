// loadgen: an asynchronous (completion-queue) gRPC load generator for feed-server and for the
// echo baseline (bench/echo).
//
//   loadgen --target 127.0.0.1:50051 --scenario reserve --concurrency 64 --duration-s 10
//   loadgen --target 127.0.0.1:50051 --scenario reserve --rate 5000 --json
//   loadgen --target 127.0.0.1:50051 --scenario feed --streams 4 --inflight 256
//   loadgen --target 127.0.0.1:50051 --scenario watch --subscribers 1000 --rate 2000
//   loadgen --target 127.0.0.1:50061 --scenario echo --concurrency 64
//
// Scenarios
//   echo          unary bench.echo.v1.Echo/Echo (the machine's gRPC ceiling).
//   reserve       unary inventory.v1.InventoryService/Reserve: one line, quantity 1, a unique
//                 idempotency key per call, a SKU from the catalogue (--hot-fraction of the
//                 calls go to the --hot-skus hot SKUs, which are seeded with --hot-stock units
//                 and sell out during the run).
//   create-order  unary order.v1.OrderService/CreateOrder, --order-items item_ids each.
//   feed          Reserve commands over --streams bidirectional Feed streams, at most
//                 --inflight commands outstanding per stream, results matched by request_id.
//   watch         --subscribers WatchStock streams (--watch-filter sku: one SKU each, drawn
//                 like the load's SKUs; all: every level) while the reserve load (closed or
//                 open loop, as below) produces changes; reports the delivery lag of each
//                 change: receive time minus level.updated_at_ms (same machine clock).
//
// Modes
//   closed loop   --concurrency C: C calls in flight, the next one sent as soon as one ends.
//                 (feed: --streams x --inflight commands in flight.)
//   open loop     --rate R: call k is due at t0 + k/R. Latency is measured from that intended
//                 send time, so any queueing (in the server, the network or this client) counts:
//                 no coordinated omission. When --max-inflight calls (feed: --inflight per
//                 stream) are already outstanding the due calls wait in a backlog and are sent,
//                 late, when a slot frees up; calls still unsent at the end are reported as
//                 "unsent". The scheduling delay of this client (actual - intended send time) is
//                 reported separately ("schedule_lag"; feed: until the Write of the command
//                 starts).
//
// Measurement: calls whose intended send time falls in [warmup end, end) are measured; the
// run stops issuing at the end, lets outstanding calls finish (each call has a deadline of
// --call-timeout-ms) and cancels streams at the latest --drain-s after the end. FAILED_PRECONDITION
// (sold out) is a valid business outcome for reserve/create-order/feed/watch: reported apart
// from errors, with its own latency. Latencies go to a log-linear histogram (1 us resolution
// below 2.048 ms, then 1024 sub-buckets per power of two, i.e. <= 0.1 % relative error, up to
// 60 s). Only 127.0.0.1 targets are accepted.
//
// Threads: --threads workers, each with its own completion queue polled by its own thread;
// closed loop: that thread also starts the next call when one completes. Open loop: each
// worker has a scheduler thread as well, which sleeps until the next due time and starts the
// call itself, so the CQ thread only handles completions and always blocks in the CQ with a
// long deadline. (Starting the calls on the CQ thread does not work with gRPC 1.51: a CQ whose
// queue is never empty, or AsyncNext with sub-millisecond deadlines, returns without polling
// the sockets; measured: ~2,600 sendmsg but ~10 recvmsg a second, responses piled up in the
// kernel and latency grew to seconds at 10k calls/s.) --channels channels (each its own TCP
// connection), the calls spread over them round-robin.

#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <sstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "echo.grpc.pb.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

using bench::echo::v1::Echo;
using bench::echo::v1::EchoReply;
using bench::echo::v1::EchoRequest;
using inventory::v1::InventoryService;
using order::v1::OrderService;

int64_t ToUs(Clock::duration d) { return duration_cast<microseconds>(d).count(); }

int64_t WallNowUs() {
  return duration_cast<microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ----------------------------------------------------------------------------- histogram ----

// HdrHistogram-style log-linear histogram of non-negative microsecond values: values below
// 2048 have their own bucket (1 us resolution); above, every power of two [2^k, 2^(k+1)) is cut
// into 1024 equal buckets (relative error <= 1/1024). Values above kMaxUs are clamped (and
// counted in clamped()). ~17.4k counters, 140 KB.
class Histogram {
 public:
  static constexpr int kSubBits = 11;
  static constexpr uint64_t kSubCount = uint64_t{1} << kSubBits;  // 2048
  static constexpr uint64_t kHalf = kSubCount / 2;                // 1024
  static constexpr uint64_t kMaxUs = 60'000'000;                  // 60 s

  Histogram() : counts_(IndexOf(kMaxUs) + 1, 0) {}

  static size_t IndexOf(uint64_t v) {
    if (v < kSubCount) return static_cast<size_t>(v);
    int msb = 63 - __builtin_clzll(v);
    int shift = msb - (kSubBits - 1);  // >= 1; (v >> shift) in [1024, 2048)
    return static_cast<size_t>(kSubCount + static_cast<uint64_t>(shift - 1) * kHalf +
                               ((v >> shift) - kHalf));
  }
  // The largest value that falls into bucket idx.
  static uint64_t HighestEquivalent(size_t idx) {
    if (idx < kSubCount) return idx;
    uint64_t k = idx - kSubCount;
    uint64_t shift = k / kHalf + 1;
    uint64_t sub = k % kHalf + kHalf;
    return ((sub + 1) << shift) - 1;
  }

  void Record(int64_t us) {
    uint64_t v = us < 0 ? 0 : static_cast<uint64_t>(us);
    if (v > kMaxUs) {
      v = kMaxUs;
      ++clamped_;
    }
    ++counts_[IndexOf(v)];
    ++total_;
    sum_ += v;
    max_ = std::max(max_, v);
    min_ = std::min(min_, v);
  }

  void Merge(const Histogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    sum_ += o.sum_;
    clamped_ += o.clamped_;
    max_ = std::max(max_, o.max_);
    min_ = std::min(min_, o.min_);
  }

  uint64_t count() const { return total_; }
  uint64_t clamped() const { return clamped_; }
  uint64_t max() const { return total_ ? max_ : 0; }
  uint64_t min() const { return total_ ? min_ : 0; }
  double mean() const { return total_ ? static_cast<double>(sum_) / static_cast<double>(total_) : 0; }

  // The value below or at which p percent of the samples fall (highest equivalent value of the
  // bucket holding the ceil(p/100 * n)-th sample, capped at the recorded maximum).
  uint64_t Percentile(double p) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(total_)));
    rank = std::clamp<uint64_t>(rank, 1, total_);
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(HighestEquivalent(i), max_);
    }
    return max_;
  }

  nlohmann::json Json() const {
    return {{"count", total_},     {"p50", Percentile(50)},     {"p90", Percentile(90)},
            {"p99", Percentile(99)}, {"p999", Percentile(99.9)}, {"max", max()},
            {"min", min()},        {"mean", std::round(mean() * 10) / 10}};
  }

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t sum_ = 0;
  uint64_t clamped_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

std::string FmtMs(uint64_t us) { return fmt::format("{:.3f}", static_cast<double>(us) / 1000.0); }

// ------------------------------------------------------------------------------- options ----

enum class Scenario { kEcho, kReserve, kCreateOrder, kFeed, kWatch };

struct Options {
  std::string target = "127.0.0.1:50051";
  std::string scenario_name = "reserve";
  Scenario scenario = Scenario::kReserve;
  int threads = 1;
  int channels = 4;
  int concurrency = 0;  // closed loop (default 64 when no --rate)
  double rate = 0;      // open loop
  double duration_s = 10;
  double warmup_s = 2;
  double drain_s = 0;  // 0: call timeout + 1 s
  int64_t call_timeout_ms = 5000;
  int max_inflight = 10000;  // open loop, unary: outstanding calls (all threads)

  int skus = 10000;
  int hot_skus = 100;
  double hot_fraction = 0.2;
  int64_t stock = 1'000'000;
  int64_t hot_stock = 50;
  std::string sku_prefix;  // default "lg<run id>-"
  bool seed = true;
  int seed_concurrency = 128;
  int64_t ttl_ms = 0;

  int order_items = 2;
  int payload_bytes = 16;

  int streams = 4;
  int inflight = 256;
  int feed_batch = 1;  // commands per Feed message (FeedRequest.more)
  bool feed_lease = false;

  int subscribers = 1000;
  std::string watch_filter = "sku";  // sku | all
  int subscriber_channels = 0;       // 0: one per 500 subscribers
  double connect_timeout_s = 15;

  int server_pid = 0;     // > 0: also report the server's CPU and the machine's (from /proc)
  uint64_t rng_seed = 0;  // 0: random
  bool json = false;
};

constexpr int kNumCodes = 17;
const char* CodeName(int c) {
  static const char* kNames[kNumCodes] = {
      "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  return c >= 0 && c < kNumCodes ? kNames[c] : "INVALID_CODE";
}
int ClampCode(int c) { return c >= 0 && c < kNumCodes ? c : static_cast<int>(grpc::StatusCode::UNKNOWN); }

// -------------------------------------------------------------------------------- stats ----

struct Stats {
  Histogram ok_latency;        // OK results
  Histogram sold_out_latency;  // FAILED_PRECONDITION where it is a business outcome
  Histogram schedule_lag;      // open loop: actual send - intended send
  Histogram watch_lag;         // watch: receive - level.updated_at_ms (changes received in window)
  std::array<uint64_t, kNumCodes> codes{};  // measured results by code
  uint64_t warmup_calls = 0;
  uint64_t unsent = 0;      // open loop: due in the window, never sent (backlog at the end)
  uint64_t backlogged = 0;  // open loop: due in the window, sent late for lack of capacity
  std::array<uint64_t, kNumCodes> stream_end_codes{};  // streams ended other than by us
  uint64_t feed_lost = 0;       // commands outstanding on a stream that ended
  uint64_t feed_unmatched = 0;  // results with an unknown request_id
  uint64_t watch_messages = 0;
  uint64_t watch_snapshot = 0;
  uint64_t watch_changes = 0;
  uint64_t watch_changes_in_window = 0;
  uint64_t watch_conflated = 0;
  uint64_t watch_negative_lag = 0;

  void Merge(const Stats& o) {
    ok_latency.Merge(o.ok_latency);
    sold_out_latency.Merge(o.sold_out_latency);
    schedule_lag.Merge(o.schedule_lag);
    watch_lag.Merge(o.watch_lag);
    for (int i = 0; i < kNumCodes; ++i) {
      codes[i] += o.codes[i];
      stream_end_codes[i] += o.stream_end_codes[i];
    }
    warmup_calls += o.warmup_calls;
    unsent += o.unsent;
    backlogged += o.backlogged;
    feed_lost += o.feed_lost;
    feed_unmatched += o.feed_unmatched;
    watch_messages += o.watch_messages;
    watch_snapshot += o.watch_snapshot;
    watch_changes += o.watch_changes;
    watch_changes_in_window += o.watch_changes_in_window;
    watch_conflated += o.watch_conflated;
    watch_negative_lag += o.watch_negative_lag;
  }
};

// ------------------------------------------------------------------------------- shared ----

struct Shared {
  Options opt;
  bool open_loop = false;
  bool business_precondition = true;  // FAILED_PRECONDITION = sold out, not an error
  std::string run_id;
  std::vector<std::string> skus;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<Echo::Stub>> echo;
  std::vector<std::unique_ptr<InventoryService::Stub>> inventory;
  std::vector<std::unique_ptr<OrderService::Stub>> orders;
  // WatchStock subscribers use channels of their own: the server allows
  // --max-concurrent-streams (default 1000) streams per connection, beyond which the client
  // would queue them.
  std::vector<std::shared_ptr<grpc::Channel>> sub_channels;
  std::vector<std::unique_ptr<InventoryService::Stub>> sub_inventory;
  uint64_t seed_sequence = 0;

  // Set once by main when the timed run starts (steady clock, ns since its epoch).
  std::atomic<int64_t> t0_ns{0};
  std::atomic<int> workers_opened{0};
  std::atomic<int> workers_done{0};
  std::atomic<int> subs_started{0};    // WatchStock calls started (client side)
  std::atomic<int> subs_connected{0};  // ... that received their first message
  std::atomic<int> subs_ended{0};      // ... that ended before we cancelled them
  std::atomic<int> feed_started{0};
};

// Every completion-queue tag. Proceed runs on the worker thread polling the CQ.
class Tag {
 public:
  virtual void Proceed(bool ok) = 0;

 protected:
  ~Tag() = default;
};

class Worker;

// ------------------------------------------------------------------------------- unary ----

class UnaryBase : public Tag {
 public:
  UnaryBase(Worker* w, TimePoint intended) : worker(w), intended(intended) {}
  virtual ~UnaryBase() = default;
  void Proceed(bool ok) override;

  grpc::ClientContext ctx;
  grpc::Status status;
  Worker* worker;
  TimePoint intended;
  TimePoint sent;
};

template <class Resp>
class Unary final : public UnaryBase {
 public:
  using UnaryBase::UnaryBase;
  Resp resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> rpc;
};

// One tag per kind of pending operation of a stream object.
template <class T>
class OpTag final : public Tag {
 public:
  OpTag(T* self, void (T::*fn)(bool)) : self_(self), fn_(fn) {}
  void Proceed(bool ok) override { (self_->*fn_)(ok); }

 private:
  T* self_;
  void (T::*fn_)(bool);
};

class FeedStream;
class WatchSub;

// --------------------------------------------------------------------------------- worker ----

class Worker {
 public:
  Worker(int index, Shared* shared);
  ~Worker();

  void Run();
  Stats& stats() { return stats_; }
  grpc::CompletionQueue* cq() { return &cq_; }
  Shared* shared() { return sh_; }
  int index() const { return index_; }

  // Every async operation started on cq_ is counted, so the loop knows when all have ended.
  void OpStarted() { pending_ops_.fetch_add(1, std::memory_order_relaxed); }

  void OnUnaryDone(UnaryBase& call);
  // A result of one command (unary call or Feed command) intended at `intended`.
  void RecordResult(TimePoint intended, TimePoint sent, int code);
  // Returns true when the stream should send the next command now (closed loop).
  bool OnFeedResult(TimePoint intended, TimePoint sent, int code);
  void OnStreamEnded(int code) { ++stats_.stream_end_codes[ClampCode(code)]; }
  void OnFeedLost(TimePoint intended) {
    if (InWindow(intended)) ++stats_.feed_lost;
  }
  void OnWatchUpdate(const inventory::v1::StockUpdate& u);

  bool stopping() const { return stopping_; }
  bool closed_loop() const { return !sh_->open_loop; }
  TimePoint end() const { return end_; }
  TimePoint stream_deadline() const { return stream_deadline_; }

  // Request builders (also used by FeedStream).
  int PickSku();
  std::string NextKey();
  inventory::v1::ReserveRequest MakeReserve();

 private:
  bool InWindow(TimePoint t) const { return t >= measure_start_ && t < end_; }
  // Starts one call intended at `intended`; false when no capacity is left.
  bool Issue(TimePoint intended);
  TimePoint DueTime(uint64_t k) const;
  void ScheduleLoop();
  void BeginStop(TimePoint now);
  void Poll(TimePoint deadline);
  grpc::Channel* NextChannelIndex(size_t* idx);
  template <class Resp, class Prepare>
  void Launch(TimePoint intended, Prepare prepare);

  const int index_;
  Shared* const sh_;
  const Options& opt_;
  grpc::CompletionQueue cq_;
  Stats stats_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  uint64_t key_counter_ = 0;
  size_t rr_ = 0;

  std::atomic<int64_t> pending_ops_{0};
  std::atomic<int> inflight_{0};  // unary calls outstanding
  int max_inflight_ = 0;
  int closed_share_ = 0;  // closed loop: this worker's share of --concurrency

  TimePoint t0_, measure_start_, end_, hard_stop_, stream_deadline_;
  bool stopping_ = false;
  bool cancelled_ = false;
  // Open loop: this worker sends calls k*threads + index, due at t0 + (k*threads+index)/rate,
  // from its scheduler thread (which then owns rng_, key_counter_ and rr_; the CQ thread owns
  // stats_). unsent_ is written by the scheduler and read after it is joined.
  std::thread scheduler_;
  uint64_t unsent_ = 0;
  uint64_t backlogged_ = 0;

  std::vector<std::unique_ptr<FeedStream>> feed_;
  size_t feed_rr_ = 0;
  std::vector<std::unique_ptr<WatchSub>> subs_;
};

void UnaryBase::Proceed(bool /*ok*/) {
  worker->OnUnaryDone(*this);
  delete this;
}

// ---------------------------------------------------------------------------- Feed stream ----

// Thread safety: the CQ thread runs the On* handlers; in open loop the scheduler thread calls
// TryEnqueue concurrently, so all state is guarded by mu_ (never held while waiting: gRPC
// delivers completions through the CQ, not inline).
class FeedStream {
 public:
  FeedStream(Worker* w, InventoryService::Stub* stub, int window)
      : w_(w), stub_(stub), window_(window), start_tag_(this, &FeedStream::OnStart),
        read_tag_(this, &FeedStream::OnRead), write_tag_(this, &FeedStream::OnWrite),
        finish_tag_(this, &FeedStream::OnFinish) {}

  void Start() {
    std::lock_guard lock(mu_);
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      duration_cast<std::chrono::system_clock::duration>(w_->stream_deadline() -
                                                                         Clock::now()));
    rw_ = stub_->PrepareAsyncFeed(&ctx_, w_->cq());
    w_->OpStarted();
    rw_->StartCall(&start_tag_);
  }

  // Queues one Reserve command intended at `intended` if the window has room.
  bool TryEnqueue(TimePoint intended) {
    std::lock_guard lock(mu_);
    if (finished_ || closing_ || static_cast<int>(outstanding_.size()) >= window_) return false;
    EnqueueLocked(intended);
    return true;
  }

  // No more commands: half-close once every outstanding command has its result.
  void Close() {
    std::lock_guard lock(mu_);
    closing_ = true;
    MaybeWriteLocked();
  }
  void Cancel() {
    std::lock_guard lock(mu_);
    if (finished_) return;
    cancelled_ = true;
    ctx_.TryCancel();
  }

 private:
  // `write`: start writing now (false while a batch of results is being handled; the
  // caller writes once after it).
  void EnqueueLocked(TimePoint intended, bool write = true) {
    uint64_t id = next_id_++;
    inventory::v1::FeedRequest req;
    req.set_request_id(std::to_string(id));
    auto* r = req.mutable_reserve();
    *r->mutable_request() = w_->MakeReserve();
    r->set_lease_to_stream(w_->shared()->opt.feed_lease);
    queue_.emplace_back(id, std::move(req));
    outstanding_.emplace(id, Pending{intended, intended});
    if (write) MaybeWriteLocked();
  }

  void MaybeWriteLocked() {
    if (!started_ || writing_ || read_failed_ || writes_done_) return;
    if (!queue_.empty()) {
      // Everything queued while the previous write was in flight, up to --feed-batch
      // commands, goes in one message: the first, then FeedRequest.more.
      const auto now = Clock::now();
      const int batch = w_->shared()->opt.feed_batch;
      for (int n = 0; n < batch && !queue_.empty(); ++n) {
        auto& [id, req] = queue_.front();
        if (auto it = outstanding_.find(id); it != outstanding_.end()) it->second.sent = now;
        if (n == 0) {
          write_req_ = std::move(req);
        } else {
          *write_req_.add_more() = std::move(req);
        }
        queue_.pop_front();
      }
      writing_ = true;
      w_->OpStarted();
      rw_->Write(write_req_, &write_tag_);
    } else if (closing_ && outstanding_.empty()) {
      writes_done_ = true;
      writing_ = true;
      w_->OpStarted();
      rw_->WritesDone(&write_tag_);
    }
  }

  void OnStart(bool ok) {
    std::lock_guard lock(mu_);
    if (!ok) {
      read_failed_ = true;
      FinishLocked();
      return;
    }
    started_ = true;
    w_->shared()->feed_started.fetch_add(1);
    w_->OpStarted();
    rw_->Read(&resp_, &read_tag_);
    MaybeWriteLocked();
  }

  void OnWrite(bool ok) {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) return;  // the stream is broken; the failing Read finishes it
    MaybeWriteLocked();
  }

  void OnRead(bool ok) {
    std::lock_guard lock(mu_);
    if (!ok) {
      read_failed_ = true;
      FinishLocked();
      return;
    }
    OnResultLocked(resp_);
    for (const auto& more : resp_.more()) OnResultLocked(more);
    MaybeWriteLocked();
    w_->OpStarted();
    rw_->Read(&resp_, &read_tag_);
  }

  void OnResultLocked(const inventory::v1::FeedResponse& r) {
    if (r.request_id().empty()) return;  // a stock update
    uint64_t id = 0;
    const std::string& s = r.request_id();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
    auto it = ec == std::errc() ? outstanding_.find(id) : outstanding_.end();
    if (it == outstanding_.end()) {
      ++w_->stats().feed_unmatched;
      return;
    }
    Pending pending = it->second;
    outstanding_.erase(it);
    if (w_->OnFeedResult(pending.intended, pending.sent, r.code()) && !closing_) {
      EnqueueLocked(Clock::now(), false);  // closed loop: the next command at once
    }
  }

  void FinishLocked() {
    w_->OpStarted();
    rw_->Finish(&status_, &finish_tag_);
  }

  void OnFinish(bool /*ok*/) {
    std::lock_guard lock(mu_);
    finished_ = true;
    if (!cancelled_ && !status_.ok()) w_->OnStreamEnded(status_.error_code());
    for (const auto& [id, p] : outstanding_) w_->OnFeedLost(p.intended);
    outstanding_.clear();
    queue_.clear();
  }

  Worker* w_;
  InventoryService::Stub* stub_;
  const int window_;
  std::mutex mu_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<inventory::v1::FeedRequest,
                                                inventory::v1::FeedResponse>>
      rw_;
  inventory::v1::FeedRequest write_req_;
  inventory::v1::FeedResponse resp_;
  grpc::Status status_;
  struct Pending {
    TimePoint intended;
    TimePoint sent;  // when its Write started
  };
  std::deque<std::pair<uint64_t, inventory::v1::FeedRequest>> queue_;  // not yet written
  std::unordered_map<uint64_t, Pending> outstanding_;  // written or queued, no result yet
  uint64_t next_id_ = 1;
  bool started_ = false, writing_ = false, closing_ = false, writes_done_ = false;
  bool read_failed_ = false, finished_ = false, cancelled_ = false;
  OpTag<FeedStream> start_tag_, read_tag_, write_tag_, finish_tag_;
};

// --------------------------------------------------------------------- WatchStock stream ----

class WatchSub {
 public:
  WatchSub(Worker* w, InventoryService::Stub* stub)
      : w_(w), stub_(stub), start_tag_(this, &WatchSub::OnStart),
        read_tag_(this, &WatchSub::OnRead), finish_tag_(this, &WatchSub::OnFinish) {}

  void Start(const inventory::v1::WatchStockRequest& req) {
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      duration_cast<std::chrono::system_clock::duration>(w_->stream_deadline() -
                                                                         Clock::now()));
    reader_ = stub_->PrepareAsyncWatchStock(&ctx_, req, w_->cq());
    w_->OpStarted();
    reader_->StartCall(&start_tag_);
  }
  void Cancel() {
    if (finished_) return;
    cancelled_ = true;
    ctx_.TryCancel();
  }

 private:
  void OnStart(bool ok) {
    if (!ok) {
      Finish();
      return;
    }
    w_->shared()->subs_started.fetch_add(1);
    w_->OpStarted();
    reader_->Read(&update_, &read_tag_);
  }
  void OnRead(bool ok) {
    if (!ok) {
      Finish();
      return;
    }
    if (!connected_) {
      connected_ = true;
      w_->shared()->subs_connected.fetch_add(1);
    }
    w_->OnWatchUpdate(update_);
    w_->OpStarted();
    reader_->Read(&update_, &read_tag_);
  }
  void Finish() {
    w_->OpStarted();
    reader_->Finish(&status_, &finish_tag_);
  }
  void OnFinish(bool /*ok*/) {
    finished_ = true;
    if (!cancelled_) {
      w_->shared()->subs_ended.fetch_add(1);
      w_->OnStreamEnded(status_.error_code());
    }
  }

  Worker* w_;
  InventoryService::Stub* stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientAsyncReader<inventory::v1::StockUpdate>> reader_;
  inventory::v1::StockUpdate update_;
  grpc::Status status_;
  bool connected_ = false, finished_ = false, cancelled_ = false;
  OpTag<WatchSub> start_tag_, read_tag_, finish_tag_;
};

// ------------------------------------------------------------------------ worker methods ----

Worker::Worker(int index, Shared* shared)
    : index_(index), sh_(shared), opt_(shared->opt),
      rng_(shared->opt.rng_seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index) + 1) {
  const int t = opt_.threads;
  max_inflight_ = std::max(1, opt_.max_inflight / t + (index < opt_.max_inflight % t ? 1 : 0));
  closed_share_ = opt_.concurrency / t + (index < opt_.concurrency % t ? 1 : 0);
}

Worker::~Worker() = default;

int Worker::PickSku() {
  const int n = opt_.skus, h = opt_.hot_skus;
  if (h > 0 && unit_(rng_) < opt_.hot_fraction) return static_cast<int>(rng_() % static_cast<uint64_t>(h));
  return h + static_cast<int>(rng_() % static_cast<uint64_t>(n - h));
}

std::string Worker::NextKey() { return fmt::format("lg{}-{}-{}", sh_->run_id, index_, ++key_counter_); }

inventory::v1::ReserveRequest Worker::MakeReserve() {
  inventory::v1::ReserveRequest req;
  auto* line = req.add_lines();
  line->set_sku(sh_->skus[static_cast<size_t>(PickSku())]);
  line->set_quantity(1);
  if (opt_.ttl_ms > 0) req.set_ttl_ms(opt_.ttl_ms);
  req.set_idempotency_key(NextKey());
  return req;
}

grpc::Channel* Worker::NextChannelIndex(size_t* idx) {
  *idx = (static_cast<size_t>(index_) + rr_++) % sh_->channels.size();
  return sh_->channels[*idx].get();
}

template <class Resp, class Prepare>
void Worker::Launch(TimePoint intended, Prepare prepare) {
  auto* call = new Unary<Resp>(this, intended);
  call->ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(opt_.call_timeout_ms));
  call->rpc = prepare(&call->ctx);
  call->sent = Clock::now();
  OpStarted();
  inflight_.fetch_add(1, std::memory_order_relaxed);
  call->rpc->StartCall();
  call->rpc->Finish(&call->resp, &call->status, call);  // the last touch: it may complete at once
}

bool Worker::Issue(TimePoint intended) {
  const Scenario sc = opt_.scenario;
  if (sc == Scenario::kFeed) {
    for (size_t i = 0; i < feed_.size(); ++i) {
      FeedStream* s = feed_[(feed_rr_ + i) % feed_.size()].get();
      if (s->TryEnqueue(intended)) {
        feed_rr_ = (feed_rr_ + i + 1) % feed_.size();
        return true;
      }
    }
    return false;
  }
  if (!closed_loop() && inflight_.load(std::memory_order_relaxed) >= max_inflight_) return false;
  size_t ch = 0;
  NextChannelIndex(&ch);
  switch (sc) {
    case Scenario::kEcho: {
      EchoRequest req;
      req.set_value(std::string(static_cast<size_t>(opt_.payload_bytes), 'x'));
      req.set_sequence(static_cast<int64_t>(++key_counter_));
      auto* stub = sh_->echo[ch].get();
      Launch<EchoReply>(intended, [&](grpc::ClientContext* ctx) {
        return stub->PrepareAsyncEcho(ctx, req, &cq_);
      });
      break;
    }
    case Scenario::kReserve:
    case Scenario::kWatch: {
      auto req = MakeReserve();
      auto* stub = sh_->inventory[ch].get();
      Launch<inventory::v1::ReserveResponse>(intended, [&](grpc::ClientContext* ctx) {
        return stub->PrepareAsyncReserve(ctx, req, &cq_);
      });
      break;
    }
    case Scenario::kCreateOrder: {
      order::v1::CreateOrderRequest req;
      req.set_customer_id(fmt::format("cust-{}", rng_() % 100000));
      for (int i = 0; i < opt_.order_items; ++i) {
        req.add_item_ids(sh_->skus[static_cast<size_t>(PickSku())]);
      }
      req.set_total_amount(19.99 * opt_.order_items);
      req.set_idempotency_key(NextKey());
      if (opt_.ttl_ms > 0) req.set_hold_ttl_ms(opt_.ttl_ms);
      auto* stub = sh_->orders[ch].get();
      Launch<order::v1::CreateOrderResponse>(intended, [&](grpc::ClientContext* ctx) {
        return stub->PrepareAsyncCreateOrder(ctx, req, &cq_);
      });
      break;
    }
    case Scenario::kFeed:
      break;
  }
  return true;
}

void Worker::RecordResult(TimePoint intended, TimePoint sent, int code) {
  if (!InWindow(intended)) {
    if (intended < measure_start_) ++stats_.warmup_calls;
    return;
  }
  const TimePoint now = Clock::now();
  code = ClampCode(code);
  ++stats_.codes[code];
  if (code == 0) {
    stats_.ok_latency.Record(ToUs(now - intended));
  } else if (code == static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION) &&
             sh_->business_precondition) {
    stats_.sold_out_latency.Record(ToUs(now - intended));
  }
  if (sh_->open_loop) stats_.schedule_lag.Record(ToUs(sent - intended));
}

void Worker::OnUnaryDone(UnaryBase& call) {
  inflight_.fetch_sub(1, std::memory_order_relaxed);
  RecordResult(call.intended, call.sent, static_cast<int>(call.status.error_code()));
  if (closed_loop() && !stopping_) {
    TimePoint now = Clock::now();
    if (now < end_) Issue(now);
  }
}

bool Worker::OnFeedResult(TimePoint intended, TimePoint sent, int code) {
  // sent: when the command's Write started (it may wait behind earlier writes of the stream).
  RecordResult(intended, sent, code);
  return closed_loop() && !stopping_ && Clock::now() < end_;
}

void Worker::OnWatchUpdate(const inventory::v1::StockUpdate& u) {
  ++stats_.watch_messages;
  if (u.kind() == inventory::v1::StockUpdate::KIND_SNAPSHOT) ++stats_.watch_snapshot;
  if (u.kind() != inventory::v1::StockUpdate::KIND_CHANGE) return;
  ++stats_.watch_changes;
  if (u.conflated()) ++stats_.watch_conflated;
  TimePoint now = Clock::now();
  if (!InWindow(now)) return;
  ++stats_.watch_changes_in_window;
  int64_t lag = WallNowUs() - u.level().updated_at_ms() * 1000;
  if (lag < 0) ++stats_.watch_negative_lag;
  stats_.watch_lag.Record(lag);
}

TimePoint Worker::DueTime(uint64_t k) const {
  return t0_ + nanoseconds(static_cast<int64_t>(
                   static_cast<double>(k * static_cast<uint64_t>(opt_.threads) +
                                       static_cast<uint64_t>(index_)) *
                   1e9 / opt_.rate));
}

// Scheduler thread (open loop): sleeps until the next due time and starts the call. Without
// capacity (--max-inflight, or every Feed stream's window full) the due calls wait, and are
// sent late when a slot frees up: their latency still counts from their due time.
void Worker::ScheduleLoop() {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake up on time, not up to 50 us late
  uint64_t k = 0;
  bool waited = false;  // since the schedule was last on time: calls sent now are late
  for (;;) {
    const TimePoint due = DueTime(k);
    if (due >= end_) break;
    if (Clock::now() < due) {
      waited = false;
      std::this_thread::sleep_until(due);
      continue;
    }
    if (Issue(due)) {
      if (waited && due >= measure_start_) ++backlogged_;
      ++k;
      continue;
    }
    if (Clock::now() >= end_) break;
    waited = true;
    std::this_thread::sleep_for(microseconds(100));  // backlog: wait for a free slot
  }
  // Due in the window but never sent: the backlog at the end.
  for (;; ++k) {
    const TimePoint due = DueTime(k);
    if (due >= end_) break;
    if (due >= measure_start_) ++unsent_;
  }
}

void Worker::BeginStop(TimePoint /*now*/) {
  stopping_ = true;
  if (scheduler_.joinable()) {
    scheduler_.join();
    stats_.unsent += unsent_;
    stats_.backlogged += backlogged_;
  }
  for (auto& s : feed_) s->Close();
  for (auto& s : subs_) s->Cancel();
}

void Worker::Poll(TimePoint deadline) {
  auto delta = deadline - Clock::now();
  if (delta < Clock::duration::zero()) delta = Clock::duration::zero();
  gpr_timespec when = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                   gpr_time_from_nanos(duration_cast<nanoseconds>(delta).count(),
                                                       GPR_TIMESPAN));
  void* tag = nullptr;
  bool ok = false;
  if (cq_.AsyncNext(&tag, &ok, when) != grpc::CompletionQueue::GOT_EVENT) return;
  pending_ops_.fetch_sub(1, std::memory_order_relaxed);
  static_cast<Tag*>(tag)->Proceed(ok);
}

void Worker::Run() {
  // Streams are opened before the timed run starts (the watch scenario waits for them).
  const auto max_total = std::chrono::duration<double>(opt_.connect_timeout_s + opt_.warmup_s +
                                                       opt_.duration_s + opt_.drain_s + 5);
  stream_deadline_ = Clock::now() + duration_cast<Clock::duration>(max_total);
  const size_t nch = sh_->channels.size();
  if (opt_.scenario == Scenario::kFeed) {
    for (int j = index_; j < opt_.streams; j += opt_.threads) {
      feed_.push_back(std::make_unique<FeedStream>(
          this, sh_->inventory[static_cast<size_t>(j) % nch].get(), opt_.inflight));
      feed_.back()->Start();
    }
  }
  if (opt_.scenario == Scenario::kWatch) {
    for (int j = index_; j < opt_.subscribers; j += opt_.threads) {
      inventory::v1::WatchStockRequest req;
      if (opt_.watch_filter == "all") {
        // Every level: skip the (large) snapshot, resume after the seeding's last event.
        req.set_resume_after_sequence(sh_->seed_sequence);
        req.set_snapshot_on_gap(true);
      } else {
        req.add_keys()->set_sku(sh_->skus[static_cast<size_t>(PickSku())]);
      }
      subs_.push_back(std::make_unique<WatchSub>(
          this, sh_->sub_inventory[static_cast<size_t>(j) % sh_->sub_inventory.size()].get()));
      subs_.back()->Start(req);
    }
  }
  sh_->workers_opened.fetch_add(1);

  int64_t t0_ns = 0;
  while ((t0_ns = sh_->t0_ns.load()) == 0) Poll(Clock::now() + milliseconds(5));
  t0_ = TimePoint(nanoseconds(t0_ns));
  measure_start_ = t0_ + duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.warmup_s));
  end_ = measure_start_ + duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.duration_s));
  hard_stop_ = end_ + duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.drain_s));

  if (sh_->open_loop) {
    scheduler_ = std::thread([this] { ScheduleLoop(); });
  } else if (opt_.scenario == Scenario::kFeed) {
    TimePoint now = Clock::now();
    for (auto& s : feed_) {
      for (int i = 0; i < opt_.inflight; ++i) s->TryEnqueue(now);
    }
  } else {
    TimePoint now = Clock::now();
    for (int i = 0; i < closed_share_; ++i) Issue(now);
  }

  for (;;) {
    TimePoint now = Clock::now();
    if (!stopping_ && now >= end_) BeginStop(now);
    if (stopping_ && !cancelled_ && now >= hard_stop_) {
      cancelled_ = true;
      for (auto& s : feed_) s->Cancel();
      for (auto& s : subs_) s->Cancel();
    }
    if (stopping_ && pending_ops_.load() == 0) break;
    TimePoint deadline = stopping_ ? std::min(hard_stop_, now + milliseconds(100)) : end_;
    if (cancelled_) deadline = now + milliseconds(100);
    Poll(deadline);
  }
  cq_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
  feed_.clear();
  subs_.clear();
  sh_->workers_done.fetch_add(1);
}

// --------------------------------------------------------------------------------- setup ----

bool ValidTarget(const std::string& t) {
  const std::string prefix = "127.0.0.1:";
  if (t.rfind(prefix, 0) != 0) return false;
  std::string port = t.substr(prefix.size());
  if (port.empty() || port.size() > 5) return false;
  int p = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  return ec == std::errc() && ptr == port.data() + port.size() && p > 0 && p <= 65535;
}

struct SeedResult {
  double seconds = 0;
  uint64_t ok = 0;
  std::array<uint64_t, kNumCodes> codes{};
};

// AdjustStock SET for the whole catalogue, --seed-concurrency calls in flight.
SeedResult Seed(Shared& sh) {
  const Options& o = sh.opt;
  SeedResult r;
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    inventory::v1::AdjustStockResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inventory::v1::AdjustStockResponse>> rpc;
  };
  auto start = Clock::now();
  int next = 0, inflight = 0;
  auto launch = [&](int i) {
    auto* c = new Call;
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inventory::v1::AdjustStockRequest req;
    req.set_sku(sh.skus[static_cast<size_t>(i)]);
    req.set_mode(inventory::v1::ADJUST_MODE_SET);
    req.set_quantity(i < o.hot_skus ? o.hot_stock : o.stock);
    req.set_reason("loadgen seed");
    c->rpc = sh.inventory[static_cast<size_t>(i) % sh.inventory.size()]->PrepareAsyncAdjustStock(
        &c->ctx, req, &cq);
    c->rpc->StartCall();
    c->rpc->Finish(&c->resp, &c->status, c);
    ++inflight;
  };
  while (next < o.skus && inflight < o.seed_concurrency) launch(next++);
  void* tag = nullptr;
  bool ok = false;
  while (inflight > 0 && cq.Next(&tag, &ok)) {
    auto* c = static_cast<Call*>(tag);
    --inflight;
    ++r.codes[ClampCode(static_cast<int>(c->status.error_code()))];
    if (c->status.ok()) {
      ++r.ok;
      sh.seed_sequence = std::max<uint64_t>(sh.seed_sequence, c->resp.sequence());
    }
    delete c;
    if (next < o.skus) launch(next++);
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

struct CpuSample {
  double user = 0, sys = 0;
};
CpuSample SelfCpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6,
          static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6};
}

// CPU seconds of a process (all threads) and busy CPU seconds of the whole machine, from /proc.
struct ProcSample {
  double process = -1;  // < 0: unknown
  double machine_idle = -1;  // idle + iowait seconds, summed over the CPUs
  TimePoint at = Clock::now();
};
ProcSample SampleProc(int pid) {
  ProcSample r;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (pid > 0) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (std::getline(f, line)) {
      auto close = line.rfind(')');
      if (close != std::string::npos) {
        std::istringstream rest(line.substr(close + 2));
        std::string field;
        double utime = 0, stime = 0;
        // Fields 3.. after "pid (comm) "; utime and stime are fields 14 and 15.
        for (int i = 3; i <= 15 && (rest >> field); ++i) {
          if (i == 14) utime = std::strtod(field.c_str(), nullptr);
          if (i == 15) stime = std::strtod(field.c_str(), nullptr);
        }
        r.process = (utime + stime) / tick;
      }
    }
  }
  std::ifstream st("/proc/stat");
  std::string cpu;
  double v[8] = {};
  if (st >> cpu && cpu == "cpu") {
    for (double& x : v) st >> x;
    // user nice system idle iowait irq softirq steal. Busy time is derived from idle + iowait:
    // on a tickless kernel those are measured precisely, user/system are only sampled.
    r.machine_idle = (v[3] + v[4]) / tick;
  }
  r.at = Clock::now();
  return r;
}

nlohmann::json CodesJson(const std::array<uint64_t, kNumCodes>& codes, bool skip_ok) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumCodes; ++i) {
    if (codes[i] == 0 || (skip_ok && i == 0)) continue;
    j[CodeName(i)] = codes[i];
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"loadgen: async gRPC load generator for feed-server and the echo baseline"};
  app.add_option("--target", o.target, "server address, 127.0.0.1:PORT only")->capture_default_str();
  app.add_option("--scenario", o.scenario_name, "echo | reserve | create-order | feed | watch")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "completion queues (one polling thread each)")
      ->capture_default_str();
  app.add_option("--channels", o.channels, "gRPC channels (TCP connections)")->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "closed loop: calls in flight (default 64)");
  app.add_option("--rate", o.rate, "open loop: calls per second (intended send times)");
  app.add_option("--duration-s", o.duration_s, "measured seconds")->capture_default_str();
  app.add_option("--warmup-s", o.warmup_s, "warm-up seconds (not measured)")->capture_default_str();
  app.add_option("--drain-s", o.drain_s, "after the end, streams are cancelled after this long "
                                         "(default: call timeout + 1 s)");
  app.add_option("--call-timeout-ms", o.call_timeout_ms, "deadline of each unary call")
      ->capture_default_str();
  app.add_option("--max-inflight", o.max_inflight, "open loop: most unary calls outstanding")
      ->capture_default_str();
  app.add_option("--skus", o.skus, "catalogue size")->capture_default_str();
  app.add_option("--hot-skus", o.hot_skus, "hot SKUs (part of the catalogue)")->capture_default_str();
  app.add_option("--hot-fraction", o.hot_fraction, "share of the calls that go to a hot SKU")
      ->capture_default_str();
  app.add_option("--stock", o.stock, "seeded on_hand of a catalogue SKU")->capture_default_str();
  app.add_option("--hot-stock", o.hot_stock, "seeded on_hand of a hot SKU (they sell out)")
      ->capture_default_str();
  app.add_option("--sku-prefix", o.sku_prefix, "SKU names: PREFIX000123 (default: lg<run id>-)");
  app.add_option("--seed", o.seed, "seed stock with AdjustStock SET before the run")
      ->capture_default_str();
  app.add_option("--seed-concurrency", o.seed_concurrency, "AdjustStock calls in flight")
      ->capture_default_str();
  app.add_option("--ttl-ms", o.ttl_ms, "hold TTL (0: server default)")->capture_default_str();
  app.add_option("--order-items", o.order_items, "create-order: item_ids per order")
      ->capture_default_str();
  app.add_option("--payload-bytes", o.payload_bytes, "echo: request value size")->capture_default_str();
  app.add_option("--streams", o.streams, "feed: Feed streams")->capture_default_str();
  app.add_option("--inflight", o.inflight, "feed: commands outstanding per stream")->capture_default_str();
  app.add_option("--feed-batch", o.feed_batch,
                 "feed: at most this many commands per message (FeedRequest.more)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--feed-lease", o.feed_lease, "feed: lease holds to the stream")->capture_default_str();
  app.add_option("--subscribers", o.subscribers, "watch: WatchStock streams")->capture_default_str();
  app.add_option("--watch-filter", o.watch_filter, "watch: sku (one SKU each) | all")
      ->capture_default_str();
  app.add_option("--subscriber-channels", o.subscriber_channels,
                 "watch: channels (connections) for the subscribers (0: one per 500)")
      ->capture_default_str();
  app.add_option("--connect-timeout-s", o.connect_timeout_s,
                 "connecting channels / watch subscribers")
      ->capture_default_str();
  app.add_option("--rng-seed", o.rng_seed, "0: random");
  app.add_option("--server-pid", o.server_pid,
                 "also report this process's CPU and the machine's busy CPU over the window");
  app.add_flag("--json", o.json, "one-line JSON summary on stdout (report on stderr)");
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "loadgen: %s\n", msg.c_str());
    return 2;
  };
  if (!ValidTarget(o.target)) return fail("--target must be 127.0.0.1:PORT, got '" + o.target + "'");
  const std::vector<std::pair<std::string, Scenario>> kScenarios = {
      {"echo", Scenario::kEcho}, {"reserve", Scenario::kReserve},
      {"create-order", Scenario::kCreateOrder}, {"feed", Scenario::kFeed},
      {"watch", Scenario::kWatch}};
  bool known = false;
  for (const auto& [name, sc] : kScenarios) {
    if (name == o.scenario_name) {
      o.scenario = sc;
      known = true;
    }
  }
  if (!known) return fail("unknown --scenario '" + o.scenario_name + "'");
  if (o.rate > 0 && o.concurrency > 0) return fail("--rate (open loop) and --concurrency (closed loop) exclude each other");
  if (o.rate < 0 || o.rate > 1e7) return fail("--rate must be in (0, 1e7]");
  if (o.scenario == Scenario::kFeed && o.concurrency > 0) {
    return fail("feed: closed loop is --streams x --inflight; --concurrency does not apply");
  }
  if (o.rate == 0 && o.concurrency == 0 && o.scenario != Scenario::kFeed) o.concurrency = 64;
  if (o.threads < 1 || o.threads > 64) return fail("--threads must be in [1, 64]");
  if (o.channels < 1 || o.channels > 1024) return fail("--channels must be in [1, 1024]");
  if (o.concurrency < 0 || o.concurrency > 100000) return fail("--concurrency must be in [1, 100000]");
  if (o.duration_s <= 0 || o.duration_s > 3600) return fail("--duration-s must be in (0, 3600]");
  if (o.warmup_s < 0 || o.warmup_s > 600) return fail("--warmup-s must be in [0, 600]");
  if (o.call_timeout_ms < 1 || o.call_timeout_ms > 60000) return fail("--call-timeout-ms must be in [1, 60000]");
  if (o.drain_s <= 0) o.drain_s = static_cast<double>(o.call_timeout_ms) / 1000.0 + 1.0;
  if (o.max_inflight < o.threads) return fail("--max-inflight must be >= --threads");
  if (o.skus < 1 || o.skus > 10'000'000) return fail("--skus must be in [1, 10000000]");
  if (o.hot_skus < 0 || o.hot_skus >= o.skus) return fail("--hot-skus must be in [0, --skus)");
  if (o.hot_fraction < 0 || o.hot_fraction > 1) return fail("--hot-fraction must be in [0, 1]");
  if (o.streams < 1 || o.inflight < 1) return fail("--streams and --inflight must be >= 1");
  if (o.subscribers < 0 || o.subscribers > 100000) return fail("--subscribers must be in [0, 100000]");
  if (o.watch_filter != "sku" && o.watch_filter != "all") return fail("--watch-filter must be sku or all");
  if (o.subscriber_channels < 0 || o.subscriber_channels > 1024) return fail("--subscriber-channels must be in [0, 1024]");
  if (o.order_items < 1 || o.order_items > 100) return fail("--order-items must be in [1, 100]");
  if (o.payload_bytes < 0 || o.payload_bytes > (1 << 20)) return fail("--payload-bytes must be in [0, 1 MiB]");
  if (o.seed_concurrency < 1) return fail("--seed-concurrency must be >= 1");

  std::random_device rd;
  if (o.rng_seed == 0) o.rng_seed = (static_cast<uint64_t>(rd()) << 32) | rd();

  Shared sh;
  sh.opt = o;
  sh.open_loop = o.rate > 0;
  sh.business_precondition = o.scenario != Scenario::kEcho;
  sh.run_id = fmt::format("{:06x}", std::mt19937_64(o.rng_seed)() & 0xFFFFFF);
  if (sh.opt.sku_prefix.empty()) sh.opt.sku_prefix = "lg" + sh.run_id + "-";
  const Options& opt = sh.opt;
  if (opt.scenario != Scenario::kEcho) {
    sh.skus.reserve(static_cast<size_t>(opt.skus));
    for (int i = 0; i < opt.skus; ++i) sh.skus.push_back(fmt::format("{}{:06d}", opt.sku_prefix, i));
  }

  FILE* report = opt.json ? stderr : stdout;
  auto connect = [&](int id) -> std::shared_ptr<grpc::Channel> {
    grpc::ChannelArguments args;
    args.SetInt("loadgen.channel", id);  // distinct args: a connection of its own
    args.SetMaxReceiveMessageSize(64 << 20);
    auto ch = grpc::CreateCustomChannel(opt.target, grpc::InsecureChannelCredentials(), args);
    if (!ch->WaitForConnected(std::chrono::system_clock::now() +
                              duration_cast<std::chrono::system_clock::duration>(
                                  std::chrono::duration<double>(opt.connect_timeout_s)))) {
      return nullptr;
    }
    return ch;
  };
  for (int i = 0; i < opt.channels; ++i) {
    auto ch = connect(i);
    if (!ch) return fail("cannot connect to " + opt.target);
    sh.channels.push_back(ch);
    sh.echo.push_back(Echo::NewStub(ch));
    sh.inventory.push_back(InventoryService::NewStub(ch));
    sh.orders.push_back(OrderService::NewStub(ch));
  }
  if (opt.scenario == Scenario::kWatch && opt.subscribers > 0) {
    int n = opt.subscriber_channels > 0 ? opt.subscriber_channels : (opt.subscribers + 499) / 500;
    for (int i = 0; i < n; ++i) {
      auto ch = connect(opt.channels + i);
      if (!ch) return fail("cannot connect to " + opt.target);
      sh.sub_channels.push_back(ch);
      sh.sub_inventory.push_back(InventoryService::NewStub(ch));
    }
  }

  nlohmann::json seed_json = nullptr;
  if (opt.scenario != Scenario::kEcho && opt.seed) {
    SeedResult r = Seed(sh);
    seed_json = {{"skus", opt.skus}, {"ok", r.ok}, {"seconds", std::round(r.seconds * 1000) / 1000},
                 {"errors", CodesJson(r.codes, true)}};
    std::fprintf(report, "seed: %d SKUs (%d hot x %lld, rest x %lld) in %.2f s, %llu ok%s\n",
                 opt.skus, opt.hot_skus, static_cast<long long>(opt.hot_stock),
                 static_cast<long long>(opt.stock), r.seconds,
                 static_cast<unsigned long long>(r.ok),
                 r.ok == static_cast<uint64_t>(opt.skus) ? "" : fmt::format(", errors {}", CodesJson(r.codes, true).dump()).c_str());
    if (r.ok == 0) return fail("seeding failed: " + CodesJson(r.codes, true).dump());
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < opt.threads; ++i) workers.push_back(std::make_unique<Worker>(i, &sh));
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([p = w.get()] { p->Run(); });

  // Wait for the streams to open (watch: every subscriber has its first message).
  auto connect_start = Clock::now();
  auto connect_deadline = connect_start + duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(opt.connect_timeout_s));
  while (sh.workers_opened.load() < opt.threads) std::this_thread::sleep_for(milliseconds(1));
  if (opt.scenario == Scenario::kWatch) {
    const bool need_message = opt.watch_filter == "sku";
    while (Clock::now() < connect_deadline &&
           (need_message ? sh.subs_connected.load() : sh.subs_started.load()) +
                   sh.subs_ended.load() < opt.subscribers) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  } else if (opt.scenario == Scenario::kFeed) {
    while (Clock::now() < connect_deadline && sh.feed_started.load() < opt.streams) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
  const double connect_s = std::chrono::duration<double>(Clock::now() - connect_start).count();
  const int subs_connected_at_start = sh.subs_connected.load();
  const int subs_started_at_start = sh.subs_started.load();

  const TimePoint t0 = Clock::now() + milliseconds(1);
  const TimePoint measure_start =
      t0 + duration_cast<Clock::duration>(std::chrono::duration<double>(opt.warmup_s));
  const TimePoint end =
      measure_start + duration_cast<Clock::duration>(std::chrono::duration<double>(opt.duration_s));
  sh.t0_ns.store(duration_cast<nanoseconds>(t0.time_since_epoch()).count());
  std::this_thread::sleep_until(measure_start);
  const CpuSample cpu0 = SelfCpu();
  const ProcSample proc0 = SampleProc(opt.server_pid);
  std::this_thread::sleep_until(end);
  const CpuSample cpu1 = SelfCpu();
  const ProcSample proc1 = SampleProc(opt.server_pid);
  const int subs_connected_at_end = sh.subs_connected.load() - sh.subs_ended.load();

  // Bounded: the workers stop by themselves (calls have deadlines, streams are cancelled after
  // --drain-s); if one does not, give up loudly instead of hanging.
  const TimePoint give_up =
      end + duration_cast<Clock::duration>(std::chrono::duration<double>(opt.drain_s + 10));
  while (sh.workers_done.load() < opt.threads) {
    if (Clock::now() > give_up) {
      std::fprintf(stderr, "loadgen: workers did not stop %.0f s after the end; exiting\n",
                   opt.drain_s + 10);
      std::fflush(stderr);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  for (auto& t : threads) t.join();

  Stats total;
  for (auto& w : workers) total.Merge(w->stats());
  workers.clear();

  // ---- report ----
  uint64_t all = 0;
  for (auto c : total.codes) all += c;
  const uint64_t ok = total.codes[0];
  const uint64_t sold_out = sh.business_precondition ? total.codes[9] : 0;
  const uint64_t errors = all - ok - sold_out;
  Histogram valid;
  valid.Merge(total.ok_latency);
  valid.Merge(total.sold_out_latency);
  const double dur = opt.duration_s;
  const double cpu_user = cpu1.user - cpu0.user, cpu_sys = cpu1.sys - cpu0.sys;
  auto errors_by_code = total.codes;
  errors_by_code[0] = 0;
  if (sh.business_precondition) errors_by_code[9] = 0;

  const char* mode = sh.open_loop ? "open" : "closed";
  std::fprintf(report, "%s %s loop, %s, %d thread(s), %d channel(s), %s, %.1f s (+%.1f s warm-up)\n",
               opt.scenario_name.c_str(), mode, opt.target.c_str(), opt.threads, opt.channels,
               sh.open_loop ? fmt::format("rate {:.0f}/s", opt.rate).c_str()
               : opt.scenario == Scenario::kFeed
                   ? fmt::format("{} streams x {} in flight", opt.streams, opt.inflight).c_str()
                   : fmt::format("concurrency {}", opt.concurrency).c_str(),
               dur, opt.warmup_s);
  std::fprintf(report, "  results   %llu (%.0f/s): ok %llu, sold out %llu, errors %llu %s\n",
               static_cast<unsigned long long>(all), static_cast<double>(all) / dur,
               static_cast<unsigned long long>(ok), static_cast<unsigned long long>(sold_out),
               static_cast<unsigned long long>(errors), CodesJson(errors_by_code, true).dump().c_str());
  if (sh.open_loop) {
    std::fprintf(report,
                 "  intended  %.0f/s; sent late for lack of capacity (backlog) %llu, still unsent "
                 "at the end %llu\n",
                 opt.rate, static_cast<unsigned long long>(total.backlogged),
                 static_cast<unsigned long long>(total.unsent));
  }
  auto line = [&](const char* name, const Histogram& h) {
    if (h.count() == 0) return;
    std::fprintf(report, "  %-9s ms: p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (n=%llu)\n", name,
                 FmtMs(h.Percentile(50)).c_str(), FmtMs(h.Percentile(90)).c_str(),
                 FmtMs(h.Percentile(99)).c_str(), FmtMs(h.Percentile(99.9)).c_str(),
                 FmtMs(h.max()).c_str(), static_cast<unsigned long long>(h.count()));
  };
  line("latency", valid);
  line("ok", total.ok_latency);
  line("sold-out", total.sold_out_latency);
  line("sched-lag", total.schedule_lag);
  if (opt.scenario == Scenario::kFeed) {
    std::fprintf(report, "  feed      streams started %d/%d, commands lost %llu, unmatched %llu\n",
                 sh.feed_started.load(), opt.streams, static_cast<unsigned long long>(total.feed_lost),
                 static_cast<unsigned long long>(total.feed_unmatched));
  }
  if (opt.scenario == Scenario::kWatch) {
    std::fprintf(report,
                 "  watch     subscribers %d: started %d, connected %d at start (%.2f s), %d at "
                 "the end; changes %llu (%llu in window, %.0f/s), snapshot rows %llu, conflated %llu\n",
                 opt.subscribers, subs_started_at_start, subs_connected_at_start, connect_s,
                 subs_connected_at_end, static_cast<unsigned long long>(total.watch_changes),
                 static_cast<unsigned long long>(total.watch_changes_in_window),
                 static_cast<double>(total.watch_changes_in_window) / dur,
                 static_cast<unsigned long long>(total.watch_snapshot),
                 static_cast<unsigned long long>(total.watch_conflated));
    line("watch-lag", total.watch_lag);
  }
  uint64_t stream_errs = 0;
  for (int i = 0; i < kNumCodes; ++i) stream_errs += total.stream_end_codes[i];
  if (stream_errs) {
    std::fprintf(report, "  streams ended by the server: %s\n",
                 CodesJson(total.stream_end_codes, false).dump().c_str());
  }
  std::fprintf(report, "  loadgen   cpu %.2f s user + %.2f s sys = %.2f cores\n", cpu_user, cpu_sys,
               (cpu_user + cpu_sys) / dur);
  // Server and machine CPU over the measured window (--server-pid); "others" is everything
  // else on the machine (other processes): a disturbed run when it is large.
  const double server_cores =
      proc0.process >= 0 && proc1.process >= 0 ? (proc1.process - proc0.process) / dur : -1;
  const double machine_cores =
      proc0.machine_idle >= 0
          ? static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)) -
                (proc1.machine_idle - proc0.machine_idle) /
                    std::chrono::duration<double>(proc1.at - proc0.at).count()
          : -1;
  const double others_cores =
      server_cores >= 0 ? machine_cores - server_cores - (cpu_user + cpu_sys) / dur : -1;
  if (server_cores >= 0) {
    std::fprintf(report, "  server    cpu %.2f cores (%.1f us per result); machine busy %.2f cores, others %.2f\n",
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
    j["ok_latency_us"] = total.ok_latency.Json();
    j["sold_out_latency_us"] = total.sold_out_latency.Json();
    if (sh.open_loop) {
      j["unsent"] = total.unsent;
      j["backlogged"] = total.backlogged;
      j["schedule_lag_us"] = total.schedule_lag.Json();
    }
    j["warmup_results"] = total.warmup_calls;
    j["seed"] = seed_json;
    if (opt.scenario == Scenario::kFeed) {
      j["feed"] = {{"streams", opt.streams},
                   {"inflight_per_stream", opt.inflight},
                   {"streams_started", sh.feed_started.load()},
                   {"lost", total.feed_lost},
                   {"unmatched", total.feed_unmatched}};
    }
    if (opt.scenario == Scenario::kWatch) {
      j["watch"] = {{"subscribers", opt.subscribers},
                    {"filter", opt.watch_filter},
                    {"started", subs_started_at_start},
                    {"connected_at_start", subs_connected_at_start},
                    {"connected_at_end", subs_connected_at_end},
                    {"connect_s", std::round(connect_s * 1000) / 1000},
                    {"changes", total.watch_changes},
                    {"changes_in_window", total.watch_changes_in_window},
                    {"changes_per_s", std::round(static_cast<double>(total.watch_changes_in_window) / dur)},
                    {"snapshot_rows", total.watch_snapshot},
                    {"conflated", total.watch_conflated},
                    {"negative_lag", total.watch_negative_lag},
                    {"lag_us", total.watch_lag.Json()}};
    }
    j["streams_ended_by_server"] = CodesJson(total.stream_end_codes, false);
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
  std::fflush(stdout);
  return 0;
}

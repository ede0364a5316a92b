// One worker: a completion queue, its polling thread, and (open loop) a scheduler thread.
#pragma once

#include "stats.h"

namespace feed::loadgen {

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

// reserve-commit: a Reserve that, once it succeeds, commits its reservation; the pair is one
// result, timed from the Reserve's intended send time to the Commit's answer.
class ReserveThenCommit final : public UnaryBase {
 public:
  using UnaryBase::UnaryBase;
  void Proceed(bool ok) override;
  inventory::v1::ReserveResponse resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<inventory::v1::ReserveResponse>> rpc;
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
  const Options& options() const { return opt_; }
  grpc::CompletionQueue* cq() { return &cq_; }
  Shared* shared() { return sh_; }
  int index() const { return index_; }

  // Every async operation started on cq_ is counted, so the loop knows when all have ended.
  void OpStarted() { pending_ops_.fetch_add(1, std::memory_order_relaxed); }

  void OnUnaryDone(UnaryBase& call);
  // reserve-commit: the Reserve of `call` succeeded; commits it as the same result.
  void CommitReserved(const ReserveThenCommit& call);
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
  // `shard` >= 0 (--feed-shards): a SKU of that shard.
  inventory::v1::ReserveRequest MakeReserve(int shard = -1);

 private:
  bool InWindow(TimePoint t) const { return t >= measure_start_ && t < end_; }
  // Starts one call intended at `intended`; false when no capacity is left.
  bool Issue(TimePoint intended);
  TimePoint DueTime(uint64_t k) const;
  void ScheduleLoop();
  void BeginStop(TimePoint now);
  void Poll(TimePoint deadline);
  grpc::Channel* NextChannelIndex(size_t* idx);
  // Call: Unary<Resp> or ReserveThenCommit.
  template <class Call, class Prepare>
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

}  // namespace feed::loadgen

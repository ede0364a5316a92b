#pragma once

#include "worker.h"

namespace feed::loadgen {

// ---------------------------------------------------------------------------- Feed stream ----

// Thread safety: the CQ thread runs the On* handlers; in open loop the scheduler thread calls
// TryEnqueue concurrently, so all state is guarded by mu_ (never held while waiting: gRPC
// delivers completions through the CQ, not inline).
class FeedStream {
 public:
  // `shard` >= 0: cluster mode, the stream serves that shard (metadata feed-shard).
  FeedStream(Worker* w, InventoryService::Stub* stub, int window, int shard)
      : w_(w),
        stub_(stub),
        window_(window),
        shard_(shard),
        start_tag_(this, &FeedStream::OnStart),
        read_tag_(this, &FeedStream::OnRead),
        write_tag_(this, &FeedStream::OnWrite),
        finish_tag_(this, &FeedStream::OnFinish) {}

  void Start() {
    std::lock_guard lock(mu_);
    ctx_.set_deadline(
        std::chrono::system_clock::now() +
        duration_cast<std::chrono::system_clock::duration>(w_->stream_deadline() - Clock::now()));
    if (!w_->options().token.empty()) {
      ctx_.AddMetadata("authorization", "Bearer " + w_->options().token);
    }
    if (shard_ >= 0) ctx_.AddMetadata("feed-shard", std::to_string(shard_));
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
    *r->mutable_request() = w_->MakeReserve(shard_);
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
  const int shard_;  // -1: a single node
  std::mutex mu_;
  grpc::ClientContext ctx_;
  std::unique_ptr<
      grpc::ClientAsyncReaderWriter<inventory::v1::FeedRequest, inventory::v1::FeedResponse>>
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

}  // namespace feed::loadgen

#pragma once

#include "worker.h"

namespace feed::loadgen {

// --------------------------------------------------------------------- WatchStock stream ----

class WatchSub {
 public:
  WatchSub(Worker* w, InventoryService::Stub* stub)
      : w_(w),
        stub_(stub),
        start_tag_(this, &WatchSub::OnStart),
        read_tag_(this, &WatchSub::OnRead),
        finish_tag_(this, &WatchSub::OnFinish) {}

  void Start(const inventory::v1::WatchStockRequest& req) {
    ctx_.set_deadline(
        std::chrono::system_clock::now() +
        duration_cast<std::chrono::system_clock::duration>(w_->stream_deadline() - Clock::now()));
    if (!w_->options().token.empty()) {
      ctx_.AddMetadata("authorization", "Bearer " + w_->options().token);
    }
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

}  // namespace feed::loadgen

#include "worker.h"

#include "feed_stream.h"
#include "watch_sub.h"

namespace feed::loadgen {

void UnaryBase::Proceed(bool /*ok*/) {
  worker->OnUnaryDone(*this);
  delete this;
}

void ReserveThenCommit::Proceed(bool ok) {
  if (!status.ok()) {
    UnaryBase::Proceed(ok);
    return;
  }
  worker->CommitReserved(*this);
  delete this;
}

// ------------------------------------------------------------------------ worker methods ----

Worker::Worker(int index, Shared* shared)
    : index_(index),
      sh_(shared),
      opt_(shared->opt),
      rng_(shared->opt.rng_seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index) + 1) {
  const int t = opt_.threads;
  max_inflight_ = std::max(1, opt_.max_inflight / t + (index < opt_.max_inflight % t ? 1 : 0));
  closed_share_ = opt_.concurrency / t + (index < opt_.concurrency % t ? 1 : 0);
}

Worker::~Worker() = default;

int Worker::PickSku() {
  const int n = opt_.skus, h = opt_.hot_skus;
  if (h > 0 && unit_(rng_) < opt_.hot_fraction)
    return static_cast<int>(rng_() % static_cast<uint64_t>(h));
  return h + static_cast<int>(rng_() % static_cast<uint64_t>(n - h));
}

std::string Worker::NextKey() {
  return fmt::format("lg{}-{}-{}", sh_->run_id, index_, ++key_counter_);
}

inventory::v1::ReserveRequest Worker::MakeReserve(int shard) {
  inventory::v1::ReserveRequest req;
  auto* line = req.add_lines();
  int sku = 0;
  if (shard >= 0) {
    const auto& of_shard = sh_->skus_of_shard[static_cast<size_t>(shard)];
    sku = of_shard[rng_() % of_shard.size()];
  } else {
    sku = PickSku();
  }
  line->set_sku(sh_->skus[static_cast<size_t>(sku)]);
  line->set_quantity(1);
  if (opt_.ttl_ms > 0) req.set_ttl_ms(opt_.ttl_ms);
  req.set_idempotency_key(NextKey());
  return req;
}

grpc::Channel* Worker::NextChannelIndex(size_t* idx) {
  *idx = (static_cast<size_t>(index_) + rr_++) % sh_->channels.size();
  return sh_->channels[*idx].get();
}

template <class Call, class Prepare>
void Worker::Launch(TimePoint intended, Prepare prepare) {
  auto* call = new Call(this, intended);
  call->ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(opt_.call_timeout_ms));
  if (!opt_.token.empty()) call->ctx.AddMetadata("authorization", "Bearer " + opt_.token);
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
      Launch<Unary<EchoReply>>(intended, [&](grpc::ClientContext* ctx) {
        return stub->PrepareAsyncEcho(ctx, req, &cq_);
      });
      break;
    }
    case Scenario::kReserve:
    case Scenario::kWatch: {
      auto req = MakeReserve();
      auto* stub = sh_->inventory[ch].get();
      Launch<Unary<inventory::v1::ReserveResponse>>(intended, [&](grpc::ClientContext* ctx) {
        return stub->PrepareAsyncReserve(ctx, req, &cq_);
      });
      break;
    }
    case Scenario::kReserveCommit: {
      auto req = MakeReserve();
      auto* stub = sh_->inventory[ch].get();
      Launch<ReserveThenCommit>(intended, [&](grpc::ClientContext* ctx) {
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
      Launch<Unary<order::v1::CreateOrderResponse>>(intended, [&](grpc::ClientContext* ctx) {
        return stub->PrepareAsyncCreateOrder(ctx, req, &cq_);
      });
      break;
    }
    case Scenario::kFeed:
      break;
  }
  return true;
}

void Worker::CommitReserved(const ReserveThenCommit& reserved) {
  inflight_.fetch_sub(1, std::memory_order_relaxed);
  inventory::v1::CommitRequest req;
  req.set_reservation_id(reserved.resp.reservation().reservation_id());
  req.set_idempotency_key(NextKey());
  size_t ch = 0;
  NextChannelIndex(&ch);
  auto* stub = sh_->inventory[ch].get();
  Launch<Unary<inventory::v1::CommitResponse>>(reserved.intended, [&](grpc::ClientContext* ctx) {
    return stub->PrepareAsyncCommit(ctx, req, &cq_);
  });
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
  gpr_timespec when =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                   gpr_time_from_nanos(duration_cast<nanoseconds>(delta).count(), GPR_TIMESPAN));
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
          this, sh_->inventory[static_cast<size_t>(j) % nch].get(), opt_.inflight,
          opt_.feed_shards > 0 ? j % opt_.feed_shards : -1));
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
  measure_start_ =
      t0_ + duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.warmup_s));
  end_ = measure_start_ +
         duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.duration_s));
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

}  // namespace feed::loadgen

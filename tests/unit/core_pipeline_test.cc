// Unit tests of the core: The commit pipeline: group commit across rounds, slow listeners,
// overlapping batches. Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// While a commit is under way, commands that arrive wait for it and then go to the store
// together: one write per commit round instead of one per command (each write is a batch
// of its own).
TEST_F(CoreTest, CommandsArrivingDuringACommitGoToTheStoreTogether) {
  ASSERT_OK(Adjust("sku-a", 1000));
  store_.SetCommitDelay(20);
  constexpr int kCallers = 16, kCallsEach = 5;
  size_t commits_before = store_.commits();
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < kCallsEach; ++i) {
        if (!Reserve({{"sku-a", 1}}).ok()) ++failures;
      }
    });
  }
  for (auto& c : callers) c.join();
  store_.SetCommitDelay(0);
  size_t commits = store_.commits() - commits_before;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Level("sku-a").reserved(), kCallers * kCallsEach);
  // Measured: 7-10 writes (a round's first caller back can find the committer free and go
  // alone, the rest gather); 20-24 when every arriving command was applied at once.
  EXPECT_LE(commits, static_cast<size_t>(kCallers * kCallsEach / 5)) << commits << " writes";
}

// Publishing to the change feed (thousands of watchers) runs on its own thread: a slow
// publication must not hold back the answers of later commands.
TEST_F(CoreTest, ASlowListenerDoesNotHoldBackAnswers) {
  auto stocked = Adjust("sku-a", 10);
  ASSERT_OK(stocked);
  WaitPublished(stocked->sequence());  // the listener below must see only the reservations
  class BlockingListener : public Recorder {
   public:
    void OnEvents(const std::vector<EventPtr>& events) override {
      {
        std::unique_lock lock(gate_mu_);
        entered_ = true;
        gate_cv_.notify_all();
        gate_cv_.wait(lock, [&] { return open_; });
      }
      Recorder::OnEvents(events);
    }
    bool WaitEntered() {
      std::unique_lock lock(gate_mu_);
      return gate_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_; });
    }
    void Open() {
      std::lock_guard lock(gate_mu_);
      open_ = true;
      gate_cv_.notify_all();
    }

   private:
    std::mutex gate_mu_;
    std::condition_variable gate_cv_;
    bool entered_ = false, open_ = false;
  } listener;
  core_->change_feed().Subscribe(&listener, UINT64_MAX);

  auto first = Reserve({{"sku-a", 1}});
  ASSERT_OK(first);
  ASSERT_TRUE(listener.WaitEntered());  // the publication of `first` is now stuck
  // Later commands are still answered (a hung answer fails the test after 10 s, not never).
  std::promise<absl::StatusOr<inv::ReserveResponse>> second;
  core_->Reserve(ReserveReq({{"sku-a", 2}}),
                 [&](absl::StatusOr<inv::ReserveResponse> r) { second.set_value(std::move(r)); });
  auto answer = second.get_future();
  bool answered = answer.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  // Its event waits for the publisher, and the stats say so (read before the listener moves).
  size_t unpublished = 0;
  if (answered) Eventually([&] { return (unpublished = core_->stats().unpublished_events) == 1; });
  listener.Open();
  ASSERT_TRUE(answered) << "the second Reserve waited for the stuck publication";
  ASSERT_OK(answer.get());
  EXPECT_EQ(unpublished, 1u);
  // Nothing is lost: both events arrive, in order, once the listener moves again.
  ASSERT_TRUE(listener.WaitFor(2));
  core_->change_feed().Unsubscribe(&listener);
  auto events = listener.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]->stock_changed().delta_reserved(), 1);
  EXPECT_EQ(events[1]->stock_changed().delta_reserved(), 2);
  EXPECT_LT(events[0]->sequence(), events[1]->sequence());
}

// Under load the writer applies batch N+1 while batch N is still being committed (with
// one command per batch, as soon as a command waits). Later batches must see what earlier,
// uncommitted batches did: an idempotency key, an order, a closed hold. Each chain below
// is queued behind a slow write, so its second command is applied while its first commits.
class OneCommandBatchTest : public CoreTest {
 protected:
  OneCommandBatchTest() { options_.max_batch_commands = 1; }
  // A command to queue the chain behind: it (or the chain's first command) is being written
  // for 30 ms while the rest of the chain is applied.
  void Pace() {
    inv::AdjustStockRequest a;
    a.set_sku("pacer");
    a.set_mode(inv::ADJUST_MODE_DELTA);
    a.set_quantity(1);
    core_->AdjustStock(a, [](absl::StatusOr<inv::AdjustStockResponse>) {});
  }
};

TEST_F(OneCommandBatchTest, BatchesAppliedWhileEarlierOnesCommitStillSeeTheirEffects) {
  ASSERT_OK(Adjust("sku-a", 100));
  store_.SetCommitDelay(30);
  inv::ReserveRequest first = ReserveReq(std::vector<L>{{"sku-a", 2}}, "", "pipeline-key", 0);
  std::promise<absl::StatusOr<inv::ReserveResponse>> p1, p2;
  std::promise<absl::StatusOr<ord::CreateOrderResponse>> p3;
  Pace();
  core_->Reserve(first, [&](absl::StatusOr<inv::ReserveResponse> r) { p1.set_value(r); });
  core_->Reserve(first, [&](absl::StatusOr<inv::ReserveResponse> r) { p2.set_value(r); });
  ord::CreateOrderRequest order;
  order.set_customer_id("c-1");
  order.add_item_ids("sku-a");
  core_->CreateOrder(order, [&](absl::StatusOr<ord::CreateOrderResponse> r) { p3.set_value(r); });
  auto r1 = p1.get_future().get();
  auto r2 = p2.get_future().get();
  auto created = p3.get_future().get();
  ASSERT_OK(r1);
  ASSERT_OK(r2);
  ASSERT_OK(created);
  EXPECT_TRUE(r2->replayed());
  EXPECT_EQ(r1->reservation().reservation_id(), r2->reservation().reservation_id());

  // Pay and advance the order in batches that overlap each other's commit.
  std::promise<absl::StatusOr<ord::OrderResponse>> paid, advanced;
  ord::PayOrderRequest pay;
  pay.set_order_id(created->order_id());
  ord::AdvanceOrderRequest advance;
  advance.set_order_id(created->order_id());
  advance.set_target(ord::ORDER_STATUS_PACKING);
  Pace();
  core_->PayOrder(pay, [&](absl::StatusOr<ord::OrderResponse> r) { paid.set_value(r); });
  core_->AdvanceOrder(advance,
                      [&](absl::StatusOr<ord::OrderResponse> r) { advanced.set_value(r); });
  ASSERT_OK(paid.get_future().get());
  auto adv = advanced.get_future().get();
  ASSERT_OK(adv);
  EXPECT_EQ(adv->order().status(), ord::ORDER_STATUS_PACKING);

  // A hold committed in one batch is reported as COMMITTED to the next, not as unknown.
  inv::CommitRequest commit;
  commit.set_reservation_id(r1->reservation().reservation_id());
  std::promise<absl::StatusOr<inv::CommitResponse>> c1, c2;
  Pace();
  core_->Commit(commit, [&](absl::StatusOr<inv::CommitResponse> r) { c1.set_value(r); });
  core_->Commit(commit, [&](absl::StatusOr<inv::CommitResponse> r) { c2.set_value(r); });
  ASSERT_OK(c1.get_future().get());
  EXPECT_TRUE(IsError(c2.get_future().get(), absl::StatusCode::kFailedPrecondition, "COMMITTED"));
  store_.SetCommitDelay(0);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  EXPECT_EQ(Level("sku-a").on_hand(), 97);
  EXPECT_EQ(Level("pacer").on_hand(), 3);
}

}  // namespace
}  // namespace feed::core_test

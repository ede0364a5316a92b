// Unit tests of the core: Events and the change feed: gap-free, one per change, in order, replay
// and gaps. Fixture and invariant checks: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

// Events

TEST_F(CoreTest, EventsAreGapFreeAndOnePerChange) {
  ASSERT_OK(Adjust("sku-a", 10));                  // 1 event
  ASSERT_OK(Adjust("sku-b", 10));                  // 1
  auto r = Reserve({{"sku-a", 1}, {"sku-b", 1}});  // 2
  ASSERT_OK(r);
  ASSERT_OK(Commit(r->reservation().reservation_id()));  // 2
  auto o = CreateOrder({"sku-a"});                       // 1 + 1
  ASSERT_OK(o);
  ASSERT_OK(Pay(o->order_id()));                 // 1 + 1 + 1
  ASSERT_OK(Cancel(o->order_id()));              // 1 + 1
  EXPECT_FALSE(Reserve({{"sku-a", 100}}).ok());  // 0
  ASSERT_EQ(EventCount(), 13u);

  auto events = Outbox();
  std::string store_id = StoreId();
  EXPECT_EQ(store_id.size(), 16u);
  std::map<std::string, uint64_t> last_version;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    EXPECT_EQ(e.sequence(), i + 1);
    EXPECT_EQ(e.event_id(), fmt::format("{}-{}", store_id, i + 1));
    ASSERT_NE(e.payload_case(), ev::Event::PAYLOAD_NOT_SET);
    if (e.has_stock_changed()) {
      const auto& l = e.stock_changed().level();
      EXPECT_EQ(e.type(), "inventory.stock.changed");
      EXPECT_EQ(e.key(), l.sku());
      EXPECT_EQ(l.sequence(), e.sequence());
      // A level's version grows by exactly one per event about it.
      std::string key = fmt::format("{}/{}", l.sku(), l.location());
      EXPECT_EQ(l.version(), last_version[key] + 1) << key;
      last_version[key] = l.version();
    }
  }
  ASSERT_OK(core_->Checkpoint());
  auto next = store_.Get(Table::kMeta, storage::meta_keys::kNextSequence);
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ(storage::DecodeSequence(**next), 14u);
  WaitPublished(13);
  EXPECT_EQ(core_->stats().last_sequence, 13u);
  EXPECT_EQ(core_->stats().events, 13u);
}

class BatchHookTest : public CoreTest {
 protected:
  BatchHookTest() {
    options_.on_batch_committed = [this](size_t commands, size_t events, double seconds) {
      hook_commands_ += commands;
      hook_events_ += events;
      EXPECT_GE(seconds, 0.0);
    };
  }
  std::atomic<size_t> hook_commands_{0}, hook_events_{0};
};

TEST_F(BatchHookTest, OnBatchCommittedSeesEveryCommittedEvent) {
  ASSERT_OK(Adjust("sku-a", 10));
  ASSERT_OK(Reserve({{"sku-a", 1}}));
  EXPECT_EQ(hook_commands_.load(), 2u);
  EXPECT_EQ(hook_events_.load(), 2u);
}

// Change feed

TEST_F(CoreTest, ChangeFeedDeliversCommittedEventsInOrder) {
  Recorder rec;
  auto attach = core_->change_feed().Subscribe(&rec, UINT64_MAX);
  EXPECT_TRUE(attach.replay.empty());
  EXPECT_FALSE(attach.gap);
  EXPECT_EQ(core_->change_feed().listeners(), 1u);

  ASSERT_OK(Adjust("sku-a", 10));
  auto r = Reserve({{"sku-a", 3}});
  ASSERT_OK(r);
  EXPECT_FALSE(Reserve({{"sku-a", 30}}).ok());  // failures publish nothing
  ASSERT_OK(Commit(r->reservation().reservation_id()));
  auto o = CreateOrder({"sku-a"});
  ASSERT_OK(o);
  ASSERT_OK(Pay(o->order_id()));
  const size_t n = EventCount();
  ASSERT_TRUE(rec.WaitFor(n));
  core_->change_feed().Unsubscribe(&rec);

  auto got = rec.events();
  auto outbox = Outbox();
  ASSERT_EQ(got.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i]->sequence(), i + 1);
    EXPECT_TRUE(ProtoEq(*got[i], outbox[i]));
  }
  // After Unsubscribe nothing more arrives.
  ASSERT_OK(Adjust("sku-a", 1));
  WaitPublished(n + 1);
  EXPECT_EQ(rec.events().size(), n);
}

TEST_F(CoreTest, ChangeFeedKeyedListenersGetOnlyTheirKeysInOrder) {
  Recorder all, a_and_c, only_b;
  core_->change_feed().Subscribe(&all, UINT64_MAX);
  core_->change_feed().Subscribe(&a_and_c, UINT64_MAX, {"sku-c", "sku-a", "sku-a"});
  core_->change_feed().Subscribe(&only_b, UINT64_MAX, {"sku-b"});
  EXPECT_EQ(core_->change_feed().listeners(), 3u);
  for (int i = 0; i < 3; ++i) {
    for (const char* sku : {"sku-a", "sku-b", "sku-c", "sku-d"}) ASSERT_OK(Adjust(sku, i + 1));
  }
  ASSERT_TRUE(all.WaitFor(12));
  ASSERT_TRUE(a_and_c.WaitFor(6));
  ASSERT_TRUE(only_b.WaitFor(3));
  core_->change_feed().Unsubscribe(&a_and_c);
  // After Unsubscribe a keyed listener gets nothing more; the others go on.
  ASSERT_OK(Adjust("sku-a", 9));
  ASSERT_OK(Adjust("sku-b", 9));
  ASSERT_TRUE(all.WaitFor(14));
  ASSERT_TRUE(only_b.WaitFor(4));
  EXPECT_EQ(a_and_c.events().size(), 6u);
  uint64_t last = 0;
  for (const auto& e : a_and_c.events()) {
    EXPECT_TRUE(e->key() == "sku-a" || e->key() == "sku-c") << e->key();
    EXPECT_GT(e->sequence(), last);  // sequence order across its keys
    last = e->sequence();
  }
  for (const auto& e : only_b.events()) EXPECT_EQ(e->key(), "sku-b");
  EXPECT_EQ(only_b.events().size(), 4u);
  core_->change_feed().Unsubscribe(&all);
  core_->change_feed().Unsubscribe(&only_b);
  EXPECT_EQ(core_->change_feed().listeners(), 0u);
}

TEST_F(CoreTest, ChangeFeedSubscribeReplaysRetainedEvents) {
  for (int i = 0; i < 6; ++i) ASSERT_OK(Adjust("sku-a", 1));
  WaitPublished(6);
  Recorder rec, rec2, rec3;
  auto a = core_->change_feed().Subscribe(&rec, 2);
  EXPECT_FALSE(a.gap);
  EXPECT_EQ(a.last_sequence, 6u);
  EXPECT_EQ(a.oldest_retained, 1u);
  ASSERT_EQ(a.replay.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(a.replay[i]->sequence(), i + 3);
  auto b = core_->change_feed().Subscribe(&rec2, 0);
  EXPECT_FALSE(b.gap);
  EXPECT_EQ(b.replay.size(), 6u);
  auto c = core_->change_feed().Subscribe(&rec3, 6);
  EXPECT_FALSE(c.gap);
  EXPECT_TRUE(c.replay.empty());

  // Live events follow the replay with no gap and no duplicate.
  ASSERT_OK(Adjust("sku-a", 1));
  ASSERT_TRUE(rec.WaitFor(1));
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_EQ(rec.events()[0]->sequence(), 7u);
  for (auto* r : {&rec, &rec2, &rec3}) core_->change_feed().Unsubscribe(r);
}

class SmallRetentionTest : public CoreTest {
 protected:
  SmallRetentionTest() { options_.change_feed_retention = 3; }
};

TEST_F(SmallRetentionTest, GapWhenRetentionIsSmallerThanTheGap) {
  for (int i = 0; i < 6; ++i) ASSERT_OK(Adjust("sku-a", 1));
  WaitPublished(6);
  Recorder rec;
  auto gap = core_->change_feed().Subscribe(&rec, 1);
  EXPECT_TRUE(gap.gap);
  EXPECT_TRUE(gap.replay.empty());
  EXPECT_EQ(gap.oldest_retained, 4u);
  EXPECT_EQ(gap.last_sequence, 6u);
  core_->change_feed().Unsubscribe(&rec);
  EXPECT_TRUE(core_->change_feed().Subscribe(&rec, 2).gap);
  core_->change_feed().Unsubscribe(&rec);
  auto ok = core_->change_feed().Subscribe(&rec, 3);
  EXPECT_FALSE(ok.gap);
  ASSERT_EQ(ok.replay.size(), 3u);
  EXPECT_EQ(ok.replay.front()->sequence(), 4u);
  EXPECT_EQ(ok.replay.back()->sequence(), 6u);
  core_->change_feed().Unsubscribe(&rec);
  EXPECT_EQ(core_->change_feed().listeners(), 0u);
}

TEST(ChangeFeedTest, ResetStartsAfterTheCommittedSequence) {
  ChangeFeed feed(10);
  feed.Reset(41);
  Recorder rec;
  auto a = feed.Subscribe(&rec, 41);
  EXPECT_FALSE(a.gap);
  EXPECT_EQ(a.oldest_retained, 42u);
  feed.Unsubscribe(&rec);
  EXPECT_TRUE(feed.Subscribe(&rec, 40).gap);
  feed.Unsubscribe(&rec);

  auto e = std::make_shared<ev::Event>();
  e->set_sequence(42);
  feed.Publish({e});
  EXPECT_EQ(feed.last_sequence(), 42u);
  auto b = feed.Subscribe(&rec, 41);
  EXPECT_FALSE(b.gap);
  ASSERT_EQ(b.replay.size(), 1u);
  EXPECT_EQ(b.replay[0]->sequence(), 42u);
  feed.Unsubscribe(&rec);
}

// A closed feed (cluster mode: the shard moved away) tells every listener, keyed or not, once,
// delivers nothing after, and tells a later subscriber at once without registering it.
TEST(ChangeFeedTest, CloseTellsEveryListenerOnceAndLaterSubscribersAtOnce) {
  struct Closing : ChangeListener {
    void OnEvents(const std::vector<EventPtr>& events) override { delivered += events.size(); }
    void OnClosed(const absl::Status& why) override { closes.push_back(why); }
    size_t delivered = 0;
    std::vector<absl::Status> closes;
  };
  ChangeFeed feed(10);
  Closing all, keyed, late;
  feed.Subscribe(&all, UINT64_MAX);
  feed.Subscribe(&keyed, UINT64_MAX, {"sku-1"});
  feed.Close(absl::UnavailableError("shard 3 moved"));
  feed.Close(absl::UnavailableError("again"));  // once only
  EXPECT_EQ(feed.listeners(), 0u);
  auto e = std::make_shared<ev::Event>();
  e->set_sequence(1);
  e->set_key("sku-1");
  feed.Publish({e});
  for (Closing* l : {&all, &keyed}) {
    EXPECT_EQ(l->delivered, 0u);
    ASSERT_EQ(l->closes.size(), 1u);
    EXPECT_EQ(l->closes[0].code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(l->closes[0].message(), "shard 3 moved");
  }
  feed.Subscribe(&late, 0, {"sku-1"});
  ASSERT_EQ(late.closes.size(), 1u);
  EXPECT_EQ(late.closes[0].message(), "shard 3 moved");
  EXPECT_EQ(feed.listeners(), 0u);
  feed.Unsubscribe(&late);  // harmless after the close

  ChangeFeed ended(10);
  Closing plain;
  ended.Subscribe(&plain, UINT64_MAX);
  ended.Close(absl::OkStatus());  // an OK reason still ends it, as UNAVAILABLE
  ASSERT_EQ(plain.closes.size(), 1u);
  EXPECT_EQ(plain.closes[0].code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace feed::core_test

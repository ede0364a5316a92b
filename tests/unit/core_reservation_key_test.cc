// Unit tests of the core: a keyed Reserve derives its reservation id from the key and keeps the
// key's record in the reservation (idempotency.h), across commit, checkpoint and restart; the
// fallbacks to a sequenced id and a record of its own. Fixture: core_fixture.h.
#include "core_fixture.h"

namespace feed::core_test {
namespace {

using ::testing::MatchesRegex;

// The key record a stored reservation carries after its Reservation (records.proto).
internal::v1::ReservationKeyRecord StoredKeyRecord(storage::Store& store, Table table,
                                                   const std::string& id) {
  auto stored = store.Get(table, id);
  EXPECT_TRUE(stored.ok() && stored->has_value()) << id;
  internal::v1::ReservationKeyRecord record;
  if (stored.ok() && stored->has_value()) {
    EXPECT_TRUE(record.ParseFromString(**stored));
  }
  return record;
}

// The answer to a retry is the first answer, flagged as a replay.
void ExpectReplayOf(const absl::StatusOr<inv::ReserveResponse>& retry,
                    const inv::ReserveResponse& first) {
  ASSERT_OK(retry);
  EXPECT_TRUE(retry->replayed());
  inv::ReserveResponse unflagged = *retry;
  unflagged.set_replayed(false);
  EXPECT_TRUE(ProtoEq(unflagged, first));
}

TEST_F(CoreTest, AKeyedReserveTakesItsIdFromTheKeyAndWritesNoRecordOfItsOwn) {
  ASSERT_OK(Adjust("sku-a", 10));
  const size_t records = StoreSize(Table::kIdempotency);
  auto first = Reserve({{"sku-a", 2}}, "", "basket-7");
  ASSERT_OK(first);
  const std::string id = first->reservation().reservation_id();
  EXPECT_THAT(id, MatchesRegex("rsv-[0-9a-f]{6}-k[0-9a-f]{16}"));
  EXPECT_EQ(StoreSize(Table::kIdempotency), records);

  auto held = StoredKeyRecord(store_, Table::kHolds, id);
  EXPECT_EQ(held.idempotency_key(), "basket-7");
  EXPECT_EQ(held.reserved_with().method(), "inventory.v1.Reserve");
  EXPECT_EQ(held.reserved_with().created_at_ms(), kStart);
  inv::ReserveResponse stored_response;
  ASSERT_TRUE(stored_response.ParseFromString(held.reserved_with().response()));
  EXPECT_TRUE(ProtoEq(stored_response, *first));

  // Another key, another id, with the same generated prefix.
  auto other = Reserve({{"sku-a", 1}}, "", "basket-8");
  ASSERT_OK(other);
  EXPECT_NE(other->reservation().reservation_id(), id);
  EXPECT_EQ(other->reservation().reservation_id().substr(0, 11), id.substr(0, 11));
}

TEST_F(CoreTest, AKeyedReserveIsReplayedWhileHeldAfterCommitCheckpointAndRestart) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto first = Reserve({{"sku-a", 2}}, "", "basket-7");
  ASSERT_OK(first);
  const std::string id = first->reservation().reservation_id();
  // Retried now, after a restart before any checkpoint (the record comes back from the
  // journal) and after one with a checkpoint (from the tables).
  auto retried_across_restarts = [&] {
    for (int round = 0; round < 3; ++round) {
      if (round == 2) ASSERT_OK(core_->Checkpoint());
      if (round > 0) Reopen();
      ExpectReplayOf(Reserve({{"sku-a", 2}}, "", "basket-7"), *first);
    }
  };
  retried_across_restarts();

  auto committed = Commit(id, "pay-7");
  ASSERT_OK(committed);
  // The closed reservation keeps the key: the retry of the Reserve still gets its first
  // answer (HELD, as it was then), and stock is not held twice.
  retried_across_restarts();
  EXPECT_EQ(StoredKeyRecord(store_, Table::kReservations, id).idempotency_key(), "basket-7");
  EXPECT_EQ(Level("sku-a").on_hand(), 8);
  EXPECT_EQ(Level("sku-a").reserved(), 0);
  auto commit_retry = Commit(id, "pay-7");
  ASSERT_OK(commit_retry);
  EXPECT_TRUE(commit_retry->replayed());
}

TEST_F(CoreTest, CallersNeverSeeTheKeyRecordOfAReservation) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto first = Reserve({{"sku-a", 2}}, "", "basket-7");
  ASSERT_OK(first);
  const std::string id = first->reservation().reservation_id();
  auto no_store_fields = [](const google::protobuf::Message& m) {
    return m.GetReflection()->GetUnknownFields(m).empty();
  };
  for (bool checkpointed : {false, true}) {
    if (checkpointed) ASSERT_OK(core_->Checkpoint());
    auto held = core_->GetReservation(id);
    ASSERT_OK(held);
    EXPECT_EQ(held->state(), inv::RESERVATION_STATE_HELD);
    EXPECT_TRUE(no_store_fields(*held)) << "checkpointed " << checkpointed;
  }
  auto committed = Commit(id);
  ASSERT_OK(committed);
  EXPECT_TRUE(no_store_fields(committed->reservation()));
  for (bool checkpointed : {false, true}) {
    if (checkpointed) ASSERT_OK(core_->Checkpoint());
    auto closed = core_->GetReservation(id);
    ASSERT_OK(closed);
    EXPECT_EQ(closed->state(), inv::RESERVATION_STATE_COMMITTED);
    EXPECT_TRUE(no_store_fields(*closed)) << "checkpointed " << checkpointed;
  }
}

TEST_F(CoreTest, AKeyKeptInAReservationRefusesAnotherRequestOrMethod) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto first = Reserve({{"sku-a", 2}}, "", "k-1");
  ASSERT_OK(first);
  const size_t events = EventCount();
  EXPECT_TRUE(IsError(Reserve({{"sku-a", 3}}, "", "k-1"), absl::StatusCode::kAlreadyExists,
                      "idempotency_key 'k-1' was already used with a different"));
  EXPECT_TRUE(IsError(Adjust("sku-a", 1, inv::ADJUST_MODE_DELTA, "k-1"),
                      absl::StatusCode::kAlreadyExists, "inventory.v1.Reserve"));
  EXPECT_TRUE(IsError(Commit(first->reservation().reservation_id(), "k-1"),
                      absl::StatusCode::kAlreadyExists, "inventory.v1.Reserve"));
  EXPECT_TRUE(IsError(CreateOrder({"sku-a"}, {}, "k-1"), absl::StatusCode::kAlreadyExists,
                      "inventory.v1.Reserve"));
  EXPECT_EQ(EventCount(), events);
  EXPECT_EQ(Level("sku-a").reserved(), 2);
}

TEST_F(CoreTest, AKeyPastItsRetentionGetsASequencedIdAndARecordOfItsOwn) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto first = Reserve({{"sku-a", 2}}, "", "k-1");
  ASSERT_OK(first);
  ASSERT_OK(Commit(first->reservation().reservation_id()));
  clock_.Advance(options_.idempotency_retention_ms + 1);
  // The key is free again, but its derived id is taken by the reservation it made.
  auto second = Reserve({{"sku-a", 2}}, "", "k-1");
  ASSERT_OK(second);
  EXPECT_FALSE(second->replayed());
  const std::string id = second->reservation().reservation_id();
  EXPECT_THAT(id, MatchesRegex("rsv-[0-9a-f]{6}-[0-9]+"));
  EXPECT_EQ(Level("sku-a").reserved(), 2);
  ASSERT_OK(core_->Checkpoint());
  auto stored = store_.Get(Table::kIdempotency, "k-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  Reopen();
  ExpectReplayOf(Reserve({{"sku-a", 2}}, "", "k-1"), *second);
  EXPECT_EQ(Level("sku-a").reserved(), 2);
}

TEST_F(CoreTest, ADerivedIdTakenByAnotherKeyFallsBackToASequencedId) {
  ASSERT_OK(Adjust("sku-a", 10));
  // Learn the id "k-1" derives, then overwrite that reservation with one of another key, as
  // a hash collision would leave it (the core itself never writes one).
  auto probe = Reserve({{"sku-a", 1}}, "", "k-1");
  ASSERT_OK(probe);
  const std::string derived = probe->reservation().reservation_id();
  ASSERT_OK(Release(derived));
  ASSERT_OK(core_->Checkpoint());
  core_.reset();
  inv::Reservation squatter;
  squatter.set_reservation_id(derived);
  squatter.set_state(inv::RESERVATION_STATE_RELEASED);
  squatter.set_created_at_ms(kStart);
  squatter.set_closed_at_ms(kStart);
  internal::v1::ReservationKeyRecord other_key;
  other_key.set_idempotency_key("k-colliding");
  other_key.mutable_reserved_with()->set_method("inventory.v1.Reserve");
  other_key.mutable_reserved_with()->set_created_at_ms(kStart);
  StoreRecord(Table::kReservations, derived,
              squatter.SerializeAsString() + other_key.SerializeAsString());
  OpenCore();

  auto first = Reserve({{"sku-a", 3}}, "", "k-1");
  ASSERT_OK(first);
  EXPECT_FALSE(first->replayed());
  EXPECT_NE(first->reservation().reservation_id(), derived);
  EXPECT_THAT(first->reservation().reservation_id(), MatchesRegex("rsv-[0-9a-f]{6}-[0-9]+"));
  ExpectReplayOf(Reserve({{"sku-a", 3}}, "", "k-1"), *first);
  EXPECT_EQ(Level("sku-a").reserved(), 3);
  // The squatter's record is untouched.
  EXPECT_EQ(StoredKeyRecord(store_, Table::kReservations, derived).idempotency_key(),
            "k-colliding");
}

class ShortHistoryTest : public CoreTest {
 protected:
  ShortHistoryTest() { options_.history_retention_ms = options_.idempotency_retention_ms / 2; }
};

TEST_F(ShortHistoryTest, KeysOutlivingTheirReservationsKeepRecordsOfTheirOwn) {
  ASSERT_OK(Adjust("sku-a", 10));
  auto first = Reserve({{"sku-a", 2}}, "", "k-1");
  ASSERT_OK(first);
  EXPECT_THAT(first->reservation().reservation_id(), MatchesRegex("rsv-[0-9a-f]{6}-[0-9]+"));
  ASSERT_OK(Commit(first->reservation().reservation_id()));
  // Past the history retention the reservation is gone, the key's record is not.
  clock_.Advance(options_.history_retention_ms + 1);
  ExpectReplayOf(Reserve({{"sku-a", 2}}, "", "k-1"), *first);
  EXPECT_EQ(Level("sku-a").on_hand(), 8);
}

}  // namespace
}  // namespace feed::core_test

// A store of data format 1 (an "outbox" table of single events, tables written synchronously)
// built with RocksDB directly: refused without --migrate, naming the flag; converted with it
// (levels and holds kept, each undelivered event a journal entry, the audit clean, the outbox
// table gone); opened again without the flag afterwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admin/v1/admin.grpc.pb.h"
#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "grpc_fixture.h"
#include "rocksdb/db.h"

namespace feed::test {
namespace {

using ::testing::HasSubstr;

// Writes a format-1 store into `path`: sku-m with 10 on hand and 3 reserved by r-1, events 1..3
// of which the relay had sent the first (cursor 2).
void WriteFormat1Store(const std::string& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* name :
       {"default", "holds", "reservations", "orders", "idempotency", "outbox", "meta"}) {
    cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, cfs, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteBatch b;
  inv::StockLevel level;
  level.set_sku("sku-m");
  level.set_location("default");
  level.set_on_hand(10);
  level.set_reserved(3);
  level.set_available(7);
  level.set_version(2);
  level.set_sequence(3);
  b.Put(handles[0], std::string("sku-m\0default", 13), level.SerializeAsString());
  inv::Reservation hold;
  hold.set_reservation_id("r-1");
  hold.set_state(inv::RESERVATION_STATE_HELD);
  hold.set_expires_at_ms(4102444800000);  // 2100
  auto* line = hold.add_lines();
  line->set_sku("sku-m");
  line->set_location("default");
  line->set_quantity(3);
  b.Put(handles[1], "r-1", hold.SerializeAsString());
  for (uint64_t seq = 2; seq <= 3; ++seq) {
    events::v1::Event e;
    e.set_event_id(fmt::format("00000000000000aa-{}", seq));
    e.set_sequence(seq);
    e.set_type("inventory.stock.changed");
    e.set_key("sku-m");
    b.Put(handles[5], storage::EncodeSequence(seq), e.SerializeAsString());
  }
  b.Put(handles[6], "store_id", "00000000000000aa");
  b.Put(handles[6], "next_sequence", storage::EncodeSequence(4));
  b.Put(handles[6], "relay_cursor", storage::EncodeSequence(2));
  ASSERT_TRUE(db->Write(rocksdb::WriteOptions(), &b).ok());
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  ASSERT_TRUE(db->Close().ok());
}

class FormatMigrationTest : public GrpcTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/feed-migration-XXXXXX";
    dir_ = mkdtemp(tmpl);
    config_.listen = "127.0.0.1:0";
    config_.metrics_listen = "";
    config_.http.listen = "";
    config_.storage.path = dir_ + "/data";
    config_.log_rpcs = false;
    config_.shutdown_grace_ms = 2000;
  }
};

TEST_F(FormatMigrationTest, Format1IsRefusedWithoutMigrateAndConvertedWithIt) {
  WriteFormat1Store(config_.storage.path);
  auto refused = server::FeedServer::Start(config_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("data format 1"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--migrate"));

  config_.migrate = true;
  StartServer();
  EXPECT_EQ(Level("sku-m").on_hand(), 10);
  EXPECT_EQ(Level("sku-m").reserved(), 3);
  inv::GetReservationRequest get;
  get.set_reservation_id("r-1");
  inv::Reservation r;
  ASSERT_TRUE(stub_->GetReservation(Ctx().get(), get, &r).ok());
  EXPECT_EQ(r.state(), inv::RESERVATION_STATE_HELD);
  // The undelivered events are journal entries now: the audit reads them from the cursor on.
  auto admin = ::admin::v1::AdminService::NewStub(channel_);
  ::admin::v1::CheckStoreResponse check;
  ASSERT_TRUE(admin->CheckStore(Ctx(30000).get(), {}, &check).ok());
  EXPECT_EQ(check.violation_count(), 0u) << check.DebugString();
  EXPECT_EQ(check.relay_cursor(), 2u);
  EXPECT_EQ(check.checkpoint_sequence(), 3u);
  EXPECT_EQ(check.journal_entries_checked(), 2u);
  // New changes continue the sequence.
  inv::ReserveResponse reserved;
  ASSERT_TRUE(Reserve("sku-m", 2, &reserved).ok());
  EXPECT_EQ(reserved.sequence(), 4u);
  server_->Shutdown();
  server_.reset();

  // Format 2 from now on: opened without the flag.
  config_.migrate = false;
  StartServer();
  EXPECT_EQ(Level("sku-m").reserved(), 5);
}

}  // namespace
}  // namespace feed::test

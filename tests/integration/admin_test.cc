// AdminService over real gRPC and RocksDB: the online audit while reservations flow, an online
// backup under load restored into a new data dir (every reservation acknowledged before the
// backup there, a new store id), and every way a backup is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "admin/backup.h"
#include "admin/v1/admin.grpc.pb.h"
#include "fmt/format.h"
#include "grpc_fixture.h"
#include "storage/rocksdb_store.h"

namespace feed::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AdminTest : public GrpcTest {
 protected:
  void Customize(server::ServerConfig& c) override {
    c.admin.backup_dir = dir_ + "/backups";
    c.storage.durability = storage::Durability::kSync;
  }
  std::unique_ptr<::admin::v1::AdminService::Stub> Admin() {
    return ::admin::v1::AdminService::NewStub(channel_);
  }
  grpc::Status Backup(const std::string& name, ::admin::v1::BackupResponse* resp) {
    ::admin::v1::BackupRequest req;
    req.set_name(name);
    return Admin()->Backup(Ctx(60000).get(), req, resp);
  }
  // Reserves one unit of `sku` per call, each under its own id, until `stop`; records every
  // acknowledged id with its sequence.
  struct Load {
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::vector<std::pair<std::string, uint64_t>> acknowledged;
    std::thread thread;
  };
  void StartLoad(Load& load, const std::string& sku) {
    load.thread = std::thread([this, &load, sku] {
      for (int i = 0; i < 5000 && !load.stop; ++i) {
        inv::ReserveRequest req;
        auto* line = req.add_lines();
        line->set_sku(sku);
        line->set_quantity(1);
        req.set_reservation_id(fmt::format("{}-r{}", sku, i));
        inv::ReserveResponse resp;
        if (stub_->Reserve(Ctx().get(), req, &resp).ok()) {
          std::lock_guard lock(load.mu);
          load.acknowledged.emplace_back(req.reservation_id(), resp.sequence());
        }
      }
    });
  }
  size_t Acknowledged(Load& load) {
    std::lock_guard lock(load.mu);
    return load.acknowledged.size();
  }
  void WaitForAcknowledged(Load& load, size_t n) {
    for (int i = 0; i < 500 && Acknowledged(load) < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GE(Acknowledged(load), n);
  }
};

TEST_F(AdminTest, TheAuditFindsNothingWhileReservationsFlow) {
  Adjust("a-1", 100000);
  Load load;
  StartLoad(load, "a-1");
  WaitForAcknowledged(load, 50);
  for (int round = 0; round < 2; ++round) {
    ::admin::v1::CheckStoreRequest req;
    ::admin::v1::CheckStoreResponse resp;
    grpc::Status s = Admin()->CheckStore(Ctx(60000).get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.violation_count(), 0u) << resp.DebugString();
    EXPECT_EQ(resp.levels_checked(), 1u);
    EXPECT_GE(resp.holds_checked(), 50u);
    EXPECT_GT(resp.as_of_sequence(), 50u);
  }
  load.stop = true;
  load.thread.join();
  ::admin::v1::CheckStoreRequest too_many;
  too_many.set_max_violations(1'000'000);
  ::admin::v1::CheckStoreResponse resp;
  grpc::Status s = Admin()->CheckStore(Ctx().get(), too_many, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("max_violations"));
  // A single node has no shards to choose from.
  ::admin::v1::CheckStoreRequest with_shard;
  with_shard.set_shard(0);
  s = Admin()->CheckStore(Ctx().get(), with_shard, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("shard: this server is a single node"));
  EXPECT_FALSE(resp.has_shard());
}

TEST_F(AdminTest, ABackupUnderLoadRestoresEveryAcknowledgedReservationUnderANewStoreId) {
  Adjust("b-1", 100000);
  Load load;
  StartLoad(load, "b-1");
  WaitForAcknowledged(load, 100);
  const size_t before_backup = Acknowledged(load);
  ::admin::v1::BackupResponse backup;
  grpc::Status s = Backup("under-load", &backup);
  ASSERT_TRUE(s.ok()) << s.error_message();
  WaitForAcknowledged(load, before_backup + 50);  // the writer went on
  load.stop = true;
  load.thread.join();

  const auto& m = backup.manifest();
  EXPECT_EQ(backup.path(), dir_ + "/backups/under-load");
  EXPECT_EQ(m.format_version(), storage::kFormatVersion);
  EXPECT_EQ(m.store_id().size(), 16u);
  EXPECT_GT(m.files_size(), 0);
  for (const auto& f : m.files()) EXPECT_EQ(f.sha256().size(), 64u) << f.name();
  EXPECT_TRUE(fs::exists(fs::path(backup.path()) / admin::kManifestFile));
  // Every reservation acknowledged before the backup began is in it.
  std::vector<std::pair<std::string, uint64_t>> acknowledged;
  {
    std::lock_guard lock(load.mu);
    acknowledged = load.acknowledged;
  }
  for (size_t i = 0; i < before_backup; ++i) {
    ASSERT_LE(acknowledged[i].second, m.last_sequence()) << acknowledged[i].first;
  }
  auto verified = admin::VerifyBackup(backup.path());
  ASSERT_TRUE(verified.ok()) << verified.status();

  // A second server on a restore of it.
  server::ServerConfig restored = config_;
  restored.storage.path = dir_ + "/restored";
  restored.restore_from = backup.path();
  restored.admin.backup_dir.clear();
  {
    auto second = server::FeedServer::Start(restored);
    ASSERT_TRUE(second.ok()) << second.status();
    auto channel = grpc::CreateChannel((*second)->address(), grpc::InsecureChannelCredentials());
    auto stub = inv::InventoryService::NewStub(channel);
    size_t in_backup = 0;
    for (const auto& [id, sequence] : acknowledged) {
      inv::GetReservationRequest req;
      req.set_reservation_id(id);
      inv::Reservation r;
      grpc::Status got = stub->GetReservation(Ctx().get(), req, &r);
      if (sequence <= m.last_sequence()) {
        ASSERT_TRUE(got.ok()) << id << ": " << got.error_message();
        EXPECT_EQ(r.state(), inv::RESERVATION_STATE_HELD);
        ++in_backup;
      } else {
        EXPECT_EQ(got.error_code(), grpc::StatusCode::NOT_FOUND) << id;
      }
    }
    EXPECT_GE(in_backup, before_backup);
    // The restored store is sound, and its reserved count is the holds it has.
    auto admin_stub = ::admin::v1::AdminService::NewStub(channel);
    ::admin::v1::CheckStoreResponse check;
    ASSERT_TRUE(admin_stub->CheckStore(Ctx(60000).get(), {}, &check).ok());
    EXPECT_EQ(check.violation_count(), 0u) << check.DebugString();
    EXPECT_EQ(check.holds_checked(), in_backup);
    (*second)->Shutdown();
  }
  // A new timeline: a new store id, the old one kept as previous_store_id.
  storage::RocksDbOptions ro;
  ro.path = restored.storage.path;
  ro.read_only = true;
  auto store = storage::OpenRocksDbStore(ro);
  ASSERT_TRUE(store.ok()) << store.status();
  auto id = (*store)->Get(storage::Table::kMeta, storage::meta_keys::kStoreId);
  auto previous = (*store)->Get(storage::Table::kMeta, "previous_store_id");
  ASSERT_TRUE(id.ok() && id->has_value() && previous.ok() && previous->has_value());
  EXPECT_NE(**id, m.store_id());
  EXPECT_EQ(**previous, m.store_id());
  // Restoring again into the now non-empty folder is refused.
  auto again = admin::RestoreBackup(backup.path(), restored.storage.path);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("is not empty"));
}

// A record spoiled in a stopped store through the storage API: the offline audit
// (feed-server --check) names it, and a server refuses to start on it.
TEST_F(AdminTest, TheAuditNamesARecordSpoiledInAStoppedStore) {
  Adjust("s-1", 10);
  inv::ReserveResponse held;
  ASSERT_TRUE(Reserve("s-1", 4, &held).ok());
  stub_.reset();
  server_->Shutdown();
  server_.reset();
  {
    storage::RocksDbOptions ro;
    ro.path = config_.storage.path;
    auto store = storage::OpenRocksDbStore(ro);
    ASSERT_TRUE(store.ok()) << store.status();
    inv::StockLevel spoiled;
    spoiled.set_sku("s-1");
    spoiled.set_location("default");
    spoiled.set_on_hand(10);
    spoiled.set_reserved(1);  // the open hold reserves 4
    spoiled.set_available(9);
    auto group = (*store)->NewWriteGroup();
    group->Put(storage::Table::kStock, std::string("s-1\0default", 11),
               spoiled.SerializeAsString());
    ASSERT_TRUE((*store)->Commit(*group).ok());
  }
  auto report = server::CheckStoreOffline(config_);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->violation_count(), 1u) << report->DebugString();
  EXPECT_EQ(report->violations(0).kind(), "reserved_mismatch");
  EXPECT_EQ(report->violations(0).key(), "s-1@default");
  EXPECT_THAT(report->violations(0).message(), HasSubstr("reserved 1 but its open holds sum to 4"));
  auto refused = server::FeedServer::Start(config_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(refused.status().message(), HasSubstr("sku 's-1' at 'default' has reserved 1"));
}

TEST_F(AdminTest, ACorruptIncompleteOrPaddedBackupIsRefusedByName) {
  Adjust("c-1", 10);
  ::admin::v1::BackupResponse backup;
  ASSERT_TRUE(Backup("b", &backup).ok());
  // Copies, never the backup itself: its table files are hard links to the live store's.
  auto copy = [&](const std::string& name) {
    const std::string to = dir_ + "/" + name;
    fs::copy(backup.path(), to, fs::copy_options::recursive);
    return to;
  };
  std::string sst;
  for (const auto& f : backup.manifest().files()) {
    if (f.name().ends_with(".sst")) sst = f.name();
  }
  ASSERT_FALSE(sst.empty());

  const std::string corrupt = copy("corrupt");
  {
    std::fstream f(corrupt + "/" + sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('\x5a');
  }
  auto r = admin::RestoreBackup(corrupt, dir_ + "/r1");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr(sst + " does not match the manifest"));
  EXPECT_FALSE(fs::exists(dir_ + "/r1/CURRENT"));

  const std::string incomplete = copy("incomplete");
  fs::remove(fs::path(incomplete) / admin::kManifestFile);
  r = admin::RestoreBackup(incomplete, dir_ + "/r2");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("not a complete backup"));

  const std::string missing = copy("missing");
  fs::remove(fs::path(missing) / sst);
  r = admin::RestoreBackup(missing, dir_ + "/r3");
  EXPECT_THAT(r.status().message(), HasSubstr(sst + " is missing"));

  const std::string padded = copy("padded");
  std::ofstream(padded + "/stray.sst") << "x";
  r = admin::RestoreBackup(padded, dir_ + "/r4");
  EXPECT_THAT(r.status().message(), HasSubstr("stray.sst is not in the backup's manifest"));

  // The untouched backup restores.
  EXPECT_TRUE(admin::RestoreBackup(backup.path(), dir_ + "/r5").ok());
}

TEST_F(AdminTest, BadBackupRequestsNameTheProblem) {
  ::admin::v1::BackupResponse resp;
  grpc::Status s = Backup("a/../b", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("name: '/' is not allowed"));
  s = Backup("", &resp);
  EXPECT_THAT(s.error_message(), HasSubstr("name: 0 characters given"));
  s = Backup(".hidden", &resp);
  EXPECT_THAT(s.error_message(), HasSubstr("must not start with '.'"));
  ASSERT_TRUE(Backup("once", &resp).ok());
  s = Backup("once", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(s.error_message(), HasSubstr("exists already"));
}

TEST_F(AdminTest, ShardsAreForClusterNodesOnly) {
  // A single node has no shards: a Backup naming one is refused, and its backups name none.
  ::admin::v1::BackupRequest req;
  req.set_name("sharded");
  req.set_shard(0);
  ::admin::v1::BackupResponse resp;
  grpc::Status s = Admin()->Backup(Ctx(60000).get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("shard: this server is a single node"));
  ASSERT_TRUE(Backup("plain", &resp).ok());
  EXPECT_FALSE(resp.manifest().has_shard());
  EXPECT_EQ(resp.manifest().shard_log_next_offset(), 0);
  EXPECT_FALSE(resp.standby());

  // A single node's backup, put where a cluster restore looks, is not a shard's.
  const std::string cluster_backup = dir_ + "/cluster-backup";
  fs::create_directories(cluster_backup);
  fs::copy(resp.path(), cluster_backup + "/shard-1", fs::copy_options::recursive);
  auto store_path = [&](uint32_t shard) { return fmt::format("{}/node/shard-{}", dir_, shard); };
  auto restored = admin::RestoreShardBackups(cluster_backup, 4, store_path);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(restored.status().message(),
              HasSubstr("is not a backup of shard 1 of a cluster of 4 shards (its manifest says "
                        "a single node)"));
  EXPECT_FALSE(fs::exists(dir_ + "/node/shard-1"));
  restored = admin::RestoreShardBackups(dir_ + "/backups", 4, store_path);
  EXPECT_THAT(restored.status().message(), HasSubstr("holds no shard-<n> backup folder"));
}

class AdminOffTest : public GrpcTest {};

TEST_F(AdminOffTest, WithoutABackupDirOrKafkaBackupsAndReplaysAreOff) {
  ::admin::v1::BackupRequest req;
  req.set_name("x");
  ::admin::v1::BackupResponse resp;
  grpc::Status s = ::admin::v1::AdminService::NewStub(channel_)->Backup(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--backup-dir"));
  // No Kafka relay: nothing to replay to.
  ::admin::v1::ReplayRequest replay;
  replay.set_from_sequence(1);
  ::admin::v1::ReplayResponse replayed;
  s = ::admin::v1::AdminService::NewStub(channel_)->Replay(Ctx().get(), replay, &replayed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--kafka-brokers"));
}

}  // namespace
}  // namespace feed::test

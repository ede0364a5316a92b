#include "cluster/cluster_node.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include "bridge/shard_group.h"
#include "cluster/request_routing.h"
#include "cluster/shard_store.h"
#include "common/module_logger.h"
#include "core/journal_checkpoint.h"
#include "fmt/format.h"

namespace feed::cluster {

std::string ShardStorePath(const std::string& data_dir, uint32_t shard) {
  return (std::filesystem::path(data_dir) / fmt::format("shard-{}", shard)).string();
}

namespace {

std::shared_ptr<spdlog::logger> Log() { return ModuleLogger("cluster"); }

// Wakes a shard's relay when its core publishes events (on the core's feed-publisher).
class RelayWaker : public core::ChangeListener {
 public:
  explicit RelayWaker(bridge::Relay* relay) : relay_(relay) {}
  void OnEvents(const std::vector<core::EventPtr>&) override { relay_->Notify(); }

 private:
  bridge::Relay* relay_;
};

// After a failed claim or a fenced core, the shard is claimed again this much later while the
// group still assigns it here.
constexpr auto kRetryClaimAfter = std::chrono::seconds(1);
// Journal bytes a standby checkpoint reads per turn of the shards thread (~tens of ms).
constexpr size_t kStandbyCheckpointBytes = 8u << 20;

}  // namespace

class ClusterNode::Impl {
 public:
  Impl(ClusterOptions options, const core::Clock& clock)
      : options_(std::move(options)), clock_(clock), map_(options_.log.shards) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    auto writer = bridge::ShardLogWriter::Open(options_.log);
    if (!writer.ok()) return writer.status();
    writer_ = std::move(*writer);
    for (int32_t s = 0; s < options_.log.shards; ++s) {
      auto slot = std::make_unique<Slot>();
      slot->shard = s;
      if (absl::Status opened = OpenSlot(*slot); !opened.ok()) return opened;
      slots_.push_back(std::move(slot));
    }
    for (auto& slot : slots_) {
      if (absl::Status s = slot->replica->CatchUp(options_.log_timeout_ms); !s.ok()) {
        return absl::UnavailableError(fmt::format("shard {}: catching up with the log: {}",
                                                  slot->shard, std::string(s.message())));
      }
    }
    worker_ = std::thread([this] { WorkerLoop(); });
    auto member = bridge::ShardGroupMember::Start(
        options_.log,
        bridge::ShardGroupOptions{options_.group_id, options_.self.node_id,
                                  options_.session_timeout_ms},
        [this](const bridge::ShardAssignment& change) {
          std::lock_guard lock(mu_);
          changes_.push_back(change);
          cv_.notify_all();
        });
    if (!member.ok()) return member.status();
    member_ = std::move(*member);
    Log()->info("node {} ({}) in cluster group {}: {} shards on {}", options_.self.node_id,
                options_.self.address, options_.group_id, options_.log.shards, options_.log.topic);
    return absl::OkStatus();
  }

  void Stop() {
    member_.reset();  // no more changes
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    if (worker_.joinable()) worker_.join();
    for (auto& slot : slots_) Release(*slot, "the node stops");
  }

  std::shared_ptr<core::InventoryCore> Core(uint32_t shard) const {
    std::lock_guard lock(mu_);
    return shard < slots_.size() ? slots_[shard]->core : nullptr;
  }
  std::vector<ShardOwner> ShardMap() const {
    std::lock_guard lock(map_mu_);
    return map_;
  }
  std::vector<uint32_t> OwnedShards() const {
    std::lock_guard lock(mu_);
    std::vector<uint32_t> owned;
    for (const auto& slot : slots_) {
      if (slot->core) owned.push_back(static_cast<uint32_t>(slot->shard));
    }
    return owned;
  }
  uint32_t shard_count() const { return static_cast<uint32_t>(options_.log.shards); }
  // The slots and their stores do not change between Start and the destructor.
  storage::Store& Store(uint32_t shard) const { return *slots_.at(shard)->store; }

 private:
  struct Slot {
    int32_t shard = 0;
    std::unique_ptr<storage::Store> store;
    std::unique_ptr<ShardReplica> replica;
    std::shared_ptr<core::InventoryCore> core;  // set while this node serves the shard
    // With the core when options_.relay is set: the shard's events to the public topics.
    std::unique_ptr<bridge::Relay> relay;
    std::unique_ptr<RelayWaker> waker;
    bool assigned = false;  // by the group
    std::chrono::steady_clock::time_point claim_not_before;
    std::chrono::steady_clock::time_point next_standby_checkpoint;
  };

  absl::Status OpenSlot(Slot& slot) {
    storage::RocksDbOptions rocks = options_.store;
    rocks.path = ShardStorePath(options_.data_dir, static_cast<uint32_t>(slot.shard));
    std::error_code ec;
    std::filesystem::create_directories(rocks.path, ec);
    auto store = storage::OpenRocksDbStore(rocks);
    if (!store.ok()) return store.status();
    slot.store = std::move(*store);
    return ResumeReplica(slot);
  }

  // The slot's replica, reading on from where its store ends (the offset stored with the
  // newest entry, and the owner as of it). Also after a core stops: what the core appended
  // but did not commit locally (a round that failed or was fenced part-way) is read again
  // and stored if valid, as every other node does.
  absl::Status ResumeReplica(Slot& slot) {
    auto from = LoadShardLogPosition(*slot.store);
    if (!from.ok()) return from.status();
    PublishOwner(slot.shard, from->owner);
    auto reader = bridge::ShardLogReader::Open(options_.log, {{slot.shard, from->next_offset}});
    if (!reader.ok()) return reader.status();
    storage::Store* store_ptr = slot.store.get();
    const int32_t shard = slot.shard;
    slot.replica = std::make_unique<ShardReplica>(
        slot.shard, options_.self, *writer_, std::move(*reader), from->next_offset, from->owner,
        [store_ptr](std::string_view entry, int64_t offset, bool own) {
          // The owner's core has stored its own batches already.
          return own ? absl::OkStatus() : StoreLoggedEntry(*store_ptr, entry, offset);
        },
        [this, store_ptr, shard](const ShardOwner& owner) {
          PublishOwner(shard, owner);
          return StoreClaim(*store_ptr, owner);
        });
    return absl::OkStatus();
  }

  void PublishOwner(int32_t shard, const ShardOwner& owner) {
    std::lock_guard lock(map_mu_);
    map_[shard] = owner;
  }

  void WorkerLoop() {
    pthread_setname_np(pthread_self(), "feed-shards");
    for (;;) {
      std::deque<bridge::ShardAssignment> changes;
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(20),
                     [&] { return stopping_ || !changes_.empty(); });
        if (stopping_) return;
        changes.swap(changes_);
      }
      for (const auto& change : changes) {
        for (int32_t s : change.revoked) {
          if (s >= 0 && s < static_cast<int32_t>(slots_.size())) slots_[s]->assigned = false;
        }
        for (int32_t s : change.assigned) {
          if (s >= 0 && s < static_cast<int32_t>(slots_.size())) {
            slots_[s]->assigned = true;
            slots_[s]->claim_not_before = {};
          }
        }
        if (!change.assigned.empty()) {
          Log()->info("shards {} assigned to this node", fmt::join(change.assigned, ","));
        }
        if (!change.revoked.empty()) {
          Log()->info("shards {} {}", fmt::join(change.revoked, ","),
                      change.lost ? "lost (the session timed out)" : "revoked");
        }
      }
      for (auto& slot : slots_) Tend(*slot);
    }
  }

  // One step for one shard: release what this node may no longer serve, claim what it was
  // given, and apply the log to the standbys.
  void Tend(Slot& slot) {
    if (slot.core != nullptr) {
      if (!slot.assigned) {
        Release(slot, "the group moved it");
      } else if (absl::Status health = slot.core->health(); !health.ok()) {
        Release(slot, std::string(health.message()));
        slot.claim_not_before = std::chrono::steady_clock::now() + kRetryClaimAfter;
      } else {
        return;  // the committer drives the replica now
      }
    }
    if (slot.assigned && std::chrono::steady_clock::now() >= slot.claim_not_before) {
      if (absl::Status taken = TakeOver(slot); taken.ok()) return;
      slot.claim_not_before = std::chrono::steady_clock::now() + kRetryClaimAfter;
    }
    if (absl::Status applied = slot.replica->ApplyArrived(0); !applied.ok()) {
      Log()->error("shard {}: applying the log: {}", slot.shard, std::string(applied.message()));
    }
    CheckpointStandby(slot);
  }

  // At the cores' checkpoint interval, the standby's journal entries go into its tables, so
  // that a takeover replays only the entries since (core/journal_checkpoint.h). On this
  // thread, which is also the one that opens a core on the store: never both at once.
  void CheckpointStandby(Slot& slot) {
    const auto now = std::chrono::steady_clock::now();
    if (now < slot.next_standby_checkpoint) return;
    slot.next_standby_checkpoint =
        now + std::chrono::milliseconds(std::max<int64_t>(1, options_.core.checkpoint_interval_ms));
    // A bounded round per turn: the claims of other shards wait behind it on this thread.
    auto folded = core::CheckpointJournal(*slot.store, kStandbyCheckpointBytes);
    if (!folded.ok()) {
      Log()->error("shard {}: standby checkpoint: {}", slot.shard,
                   std::string(folded.status().message()));
      return;
    }
    if (folded->more) slot.next_standby_checkpoint = now;  // behind: go on at the next turn
    if (folded->entries > 0) {
      Log()->debug(
          "shard {}: standby checkpoint of {} journal entries ({} records) through "
          "sequence {}",
          slot.shard, folded->entries, folded->records, folded->checkpoint_sequence);
    }
  }

  absl::Status TakeOver(Slot& slot) {
    const auto started = std::chrono::steady_clock::now();
    if (absl::Status claimed = slot.replica->Claim(clock_.NowMillis(), options_.log_timeout_ms);
        !claimed.ok()) {
      Log()->warn("shard {}: claim failed: {}", slot.shard, std::string(claimed.message()));
      return claimed;
    }
    core::CoreOptions core_options = options_.core;
    core_options.generated_id_tag = GeneratedIdTag(static_cast<uint32_t>(slot.shard));
    core_options.replicated_log = std::make_shared<ShardLogReplication>(
        *slot.replica, slot.replica->ledger().owner(), options_.log_timeout_ms);
    auto core = core::InventoryCore::Open(*slot.store, clock_, core_options);
    if (!core.ok()) {
      Log()->error("shard {}: opening its core: {}", slot.shard,
                   std::string(core.status().message()));
      return core.status();
    }
    std::shared_ptr<core::InventoryCore> serving(std::move(*core));
    if (options_.relay.has_value()) {
      if (absl::Status started = StartRelay(slot, *serving); !started.ok()) {
        serving->Shutdown();
        return started;
      }
    }
    {
      std::lock_guard lock(mu_);
      slot.core = std::move(serving);
    }
    Log()->info("shard {}: serving at epoch {} ({} ms from assignment to first write)", slot.shard,
                slot.replica->ledger().owner().epoch,
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count());
    return absl::OkStatus();
  }

  void Release(Slot& slot, const std::string& why) {
    std::shared_ptr<core::InventoryCore> core;
    {
      std::lock_guard lock(mu_);
      core.swap(slot.core);
    }
    if (core == nullptr) return;
    core->Shutdown();  // its committer, the replica's only user while it ran, has stopped
    // Its streams end: the client resumes from its last sequence on the new owner, whose core
    // continues the same sequence (it recovers from the same log).
    core->change_feed().Close(absl::UnavailableError(fmt::format(
        "shard {} is no longer served by this node ({}); GetShardMap names its owner; resume "
        "there after the last sequence received",
        slot.shard, why)));
    if (slot.relay != nullptr) {
      // What it has not delivered stays in the shard's journal, in every node's copy: the
      // next owner's relay sends it (its tail check skips what the topics hold already).
      core->change_feed().Unsubscribe(slot.waker.get());
      slot.relay->Shutdown();
      slot.relay.reset();
      slot.waker.reset();
    }
    if (absl::Status resumed = ResumeReplica(slot); !resumed.ok()) {
      // The old replica stays: it may skip a batch the core appended but did not store
      // until the node restarts (which resumes from the store).
      Log()->error("shard {}: resuming its replica from the store: {}", slot.shard,
                   std::string(resumed.message()));
    }
    Log()->info("shard {}: no longer served here: {}", slot.shard, why);
  }

  absl::Status StartRelay(Slot& slot, core::InventoryCore& core) {
    bridge::RelayOptions relay = *options_.relay;
    relay.client_id = fmt::format("{}-{}-s{}", relay.client_id, options_.self.node_id, slot.shard);
    auto created = bridge::Relay::Create(*slot.store, relay,
                                         [&core] { return core.change_feed().last_sequence(); });
    if (!created.ok()) return created.status();
    slot.relay = std::move(*created);
    slot.waker = std::make_unique<RelayWaker>(slot.relay.get());
    core.change_feed().Subscribe(slot.waker.get(), UINT64_MAX);
    slot.relay->Start();
    return absl::OkStatus();
  }

  const ClusterOptions options_;
  const core::Clock& clock_;
  std::unique_ptr<bridge::ShardLogWriter> writer_;
  std::vector<std::unique_ptr<Slot>> slots_;  // fixed after Start; each tended by the worker
  std::unique_ptr<bridge::ShardGroupMember> member_;
  std::thread worker_;

  mutable std::mutex mu_;  // slot cores, changes_, stopping_
  std::condition_variable cv_;
  std::deque<bridge::ShardAssignment> changes_;
  bool stopping_ = false;

  mutable std::mutex map_mu_;
  std::vector<ShardOwner> map_;
};

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Start(ClusterOptions options,
                                                                const core::Clock& clock) {
  if (options.self.node_id.empty()) {
    return absl::InvalidArgumentError("cluster: the node id is empty");
  }
  if (options.log.shards <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("cluster: shards must be positive, got {}", options.log.shards));
  }
  auto impl = std::make_unique<Impl>(std::move(options), clock);
  if (absl::Status started = impl->Start(); !started.ok()) return started;
  return std::unique_ptr<ClusterNode>(new ClusterNode(std::move(impl)));
}

ClusterNode::ClusterNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterNode::~ClusterNode() = default;

uint32_t ClusterNode::shard_count() const { return impl_->shard_count(); }
std::shared_ptr<core::InventoryCore> ClusterNode::Core(uint32_t shard) const {
  return impl_->Core(shard);
}
storage::Store& ClusterNode::Store(uint32_t shard) const { return impl_->Store(shard); }
std::vector<ShardOwner> ClusterNode::ShardMap() const { return impl_->ShardMap(); }
std::vector<uint32_t> ClusterNode::OwnedShards() const { return impl_->OwnedShards(); }

}  // namespace feed::cluster

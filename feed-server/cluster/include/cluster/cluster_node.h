// One feed-server node in cluster mode (docs/CLUSTER.md): a slot per shard, each with its own
// RocksDB store and replica of the shard's log. Ownership comes from one Kafka consumer group
// on the log topic (cooperative-sticky assignment, static membership: group.instance.id is
// the node id, so a restart within the session timeout keeps the node's shards): a shard
// assigned to this node is claimed (ShardReplica::Claim) and served by an InventoryCore whose
// committer appends to the log; every other shard is a warm standby that applies the log into
// its store. A core fenced by a newer claim stops (crash-only) and its slot goes back to
// standby; a revoked or lost assignment does the same.
//
// Threads: "feed-members" polls the group (rebalance callbacks); "feed-shards" claims,
// releases, catches the standbys up and checkpoints them (core/journal_checkpoint.h); each served
// shard's core threads and, with options.relay, its "feed-relay". Core(), Store(), ShardMap() and
// OwnedShards() are for any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bridge/relay.h"
#include "bridge/shard_log.h"
#include "cluster/shard_ledger.h"
#include "cluster/shard_replica.h"
#include "core/clock.h"
#include "core/inventory_core.h"
#include "core/options.h"
#include "storage/rocksdb_store.h"

namespace feed::cluster {

// Where a node keeps its copy of `shard`: a RocksDB store of its own under the data dir.
std::string ShardStorePath(const std::string& data_dir, uint32_t shard);

struct ClusterOptions {
  NodeIdentity self;
  // Brokers, topic and shard count (the topic's partitions) of the shard log.
  bridge::ShardLogOptions log;
  std::string group_id = "feed-cluster";
  // The group's session timeout: how long a silent node keeps its shards (the broker's
  // group.min.session.timeout.ms, 6 s by default, is the least it accepts).
  int64_t session_timeout_ms = 6000;
  // How long a claim, a round of appends or a catch-up may take before it fails.
  int64_t log_timeout_ms = 10000;
  // Shard s lives in <data_dir>/shard-<s>; `store` is the template of every shard's store.
  std::string data_dir;
  storage::RocksDbOptions store;
  // Every shard's core (replicated_log is set per shard).
  core::CoreOptions core;
  // Set: the owner of each shard relays its events to the public topics (bridge/relay.h), one
  // relay per shard, from the shard's journal. A failover is a relay start from the new
  // owner's copy: its tail check skips the events the topics hold already, so each event id
  // is published once after deduplication, and a SKU's events stay in their shard's order.
  std::optional<bridge::RelayOptions> relay;
};

class ClusterNode {
 public:
  // Opens every shard's store, catches each up with the log, joins the group. The topic must
  // exist with options.log.shards partitions (bridge::EnsureShardLogTopic).
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Start(ClusterOptions options,
                                                            const core::Clock& clock);
  // Closes the group membership (static: the shards stay this node's until the session
  // times out, so a quick restart takes them back without a rebalance), stops the cores.
  ~ClusterNode();

  uint32_t shard_count() const;
  // The core serving `shard`, or null when this node does not own it (or is taking it over).
  std::shared_ptr<core::InventoryCore> Core(uint32_t shard) const;
  // This node's store of `shard` (< shard_count()), owned or standby, for as long as the
  // node lives: what the online audit reads.
  storage::Store& Store(uint32_t shard) const;
  // Every shard's newest accepted claim as this node has read it (epoch 0: never claimed).
  std::vector<ShardOwner> ShardMap() const;
  std::vector<uint32_t> OwnedShards() const;

  class Impl;

 private:
  explicit ClusterNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace feed::cluster

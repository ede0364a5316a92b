// Cluster mode's membership (docs/CLUSTER.md, "Ownership"): one Kafka consumer group on the
// shard log's topic decides which node serves which shard. Cooperative-sticky assignment
// moves only the shards that must move; static membership (group.instance.id = the node id)
// keeps a restarted node's shards through a restart shorter than the session timeout. The
// member never reads records (its partitions are paused): the group is used for its
// assignment only, and the shard log's readers do the reading.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bridge/shard_log.h"

namespace feed::bridge {

struct ShardGroupOptions {
  std::string group_id = "feed-cluster";
  std::string instance_id;  // the node id: stable across restarts
  int64_t session_timeout_ms = 6000;
};

struct ShardAssignment {
  std::vector<int32_t> assigned;  // shards this member now serves, in addition
  std::vector<int32_t> revoked;   // shards it must stop serving
  // The revoked shards were lost (the session timed out, another member may own them
  // already) rather than handed over.
  bool lost = false;
};

class ShardGroupMember {
 public:
  // Called on the member's thread ("feed-members") for every change, in order.
  using OnChange = std::function<void(const ShardAssignment& change)>;

  // Joins the group on options.topic and polls it until destroyed.
  static absl::StatusOr<std::unique_ptr<ShardGroupMember>> Start(const ShardLogOptions& log,
                                                                 const ShardGroupOptions& group,
                                                                 OnChange on_change);
  // Stops polling and closes the consumer without leaving the group (static membership):
  // the coordinator moves the shards when the session times out.
  virtual ~ShardGroupMember() = default;
};

}  // namespace feed::bridge

// A feed-server node in cluster mode (docs/CLUSTER.md; --cluster-shards > 0): the shards this
// node owns, each with its core over the shard log (cluster/cluster_node.h), behind the same
// gRPC services as a single node. Unary calls are routed by shard: one for a shard this node
// serves runs on its core; one for another node's shard is answered UNAVAILABLE with the
// owner's address in the trailing metadata `feed-shard-owner`. GetShardMap answers every
// shard's owner. Streams of one shard run on its owner like unary calls; a Feed stream serves
// the shard its `feed-shard` metadata names. AdminService's CheckStore audits this node's copy
// of a shard. With --http-listen the HTTP gateway serves the same routes, forwarding a unary
// call whose shard another node serves to that node (GrpcShardForwarder). With
// --kafka-brokers each served shard relays its events to the public topics. Not served yet
// (FAILED_PRECONDITION): node-wide streams, Backup, Replay.
//
// Threads: gRPC's, the cluster node's (feed-members, feed-shards), each owned shard's core
// threads (core/inventory_core.h), librdkafka's.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/config.h"

namespace feed::server {

class ClusterServer {
 public:
  // Creates the shard log topic when missing, starts the cluster node (every shard's store
  // caught up with the log) and the gRPC server.
  static absl::StatusOr<std::unique_ptr<ClusterServer>> Start(const ServerConfig& config);
  ~ClusterServer();

  // Graceful: health NOT_SERVING, in-flight calls get config.shutdown_grace_ms, then the
  // cores stop (their shards move to other nodes when the group's session times out).
  void Shutdown();
  const std::string& address() const;
  // The HTTP gateway's "127.0.0.1:PORT" (empty without --http-listen).
  std::string http_address() const;

  class Impl;

 private:
  explicit ClusterServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace feed::server

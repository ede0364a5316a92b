// Cluster mode's hook into the commit pipeline (docs/CLUSTER.md, "The acknowledgement
// point"): with a ReplicatedLog in CoreOptions, the committer hands it every sealed batch's
// journal entry before the local commit, and no caller is answered until the log has taken
// and confirmed it. The local store then only follows the log (commits without a WAL sync),
// recording the log position of its newest entry in the same commit, so a restart resumes
// reading the log where the store ends. Single-node mode has none.
//
// Several rounds may be on their way at once (CoreOptions::replication_rounds_in_flight): the
// committer starts a round and goes on sealing the next batches while the log confirms the
// earlier ones; rounds are confirmed, stored and answered in the order they were started.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace feed::core {

class ReplicatedLog {
 public:
  // One round of journal entries on its way into the log.
  class Round {
   public:
    virtual ~Round() = default;
    // Blocks until every entry of the round is in the log and confirmed there: their
    // positions, in order. Any error fails the pipeline for good, as a failed local commit
    // does (crash-only): those callers get UNAVAILABLE, and a restart rebuilds the state
    // from the log. One thread, rounds in the order they were started.
    virtual absl::StatusOr<std::vector<int64_t>> Confirmed() = 0;
  };

  virtual ~ReplicatedLog() = default;
  // Committer thread, in commit order: sends the entries on their way and returns at once.
  // Rounds enter the log in the order they are started. The entries' bytes stay valid until
  // the round is confirmed or dropped.
  virtual std::unique_ptr<Round> Start(const std::vector<std::string_view>& journal_entries) = 0;
};

}  // namespace feed::core

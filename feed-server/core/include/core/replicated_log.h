// Cluster mode's hook into the commit pipeline (docs/CLUSTER.md, "The acknowledgement
// point"): with a ReplicatedLog in CoreOptions, the committer hands it every sealed batch's
// journal entry before the local commit, and no caller is answered until the log has taken
// and confirmed it. The local store then only follows the log (commits without a WAL sync),
// recording the log position of its newest entry in the same commit, so a restart resumes
// reading the log where the store ends. Single-node mode has none.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace feed::core {

class ReplicatedLog {
 public:
  virtual ~ReplicatedLog() = default;
  // Committer thread, in commit order: the journal entries of one round of batches. Returns
  // their positions in the log once every one is there and confirmed. Any error fails the
  // pipeline for good, as a failed local commit does (crash-only): those callers get
  // UNAVAILABLE, and a restart rebuilds the state from the log.
  virtual absl::StatusOr<std::vector<int64_t>> Append(
      const std::vector<std::string_view>& journal_entries) = 0;
};

}  // namespace feed::core

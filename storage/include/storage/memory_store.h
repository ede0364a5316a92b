// A map-backed Store for unit tests of the core and in-memory benchmarks. Not durable.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "storage/store.h"

namespace feed::storage {

class MemoryStore : public Store {
 public:
  explicit MemoryStore(Durability durability = Durability::kSync) : durability_(durability) {}

  std::unique_ptr<WriteGroup> NewWriteGroup() override;
  absl::Status Commit(WriteGroup& group, CommitMode mode) override;
  std::unique_ptr<ReadView> Snapshot() const override;
  Durability durability() const override { return durability_; }
  size_t ApproximateCount(Table table) const override { return Size(table); }
  // Keys and values, exactly.
  uint64_t ApproximateBytes(Table table) const override;
  absl::StatusOr<std::optional<std::string>> Get(Table table, std::string_view key) const override;
  absl::Status Scan(Table table, std::string_view start, std::string_view prefix,
                    const ScanFn& fn) const override;
  WriteCounts write_counts() const override { return written_.Get(); }

  // Test hooks.
  void FailNextCommit(absl::Status status) { FailCommitAfter(0, std::move(status)); }
  // The commit after the next `successes` ones fails with `status` (and applies nothing).
  void FailCommitAfter(size_t successes, absl::Status status);
  // Every commit sleeps this long first (a slow disk), so that batches overlap.
  void SetCommitDelay(int milliseconds) { commit_delay_ms_ = milliseconds; }
  size_t commits() const;
  size_t Size(Table table) const;

  using Tables = std::array<std::map<std::string, std::string, std::less<>>, kTableCount>;

 private:
  Durability durability_;
  mutable std::mutex mu_;
  Tables tables_;
  absl::Status next_commit_status_;
  size_t commits_before_failure_ = 0;
  size_t commits_ = 0;
  std::atomic<int> commit_delay_ms_{0};
  WriteCountsTotal written_;
};

}  // namespace feed::storage

// The outbound stock updates of one stream, always in sequence order.
//
// While the reader keeps up, every change is kept: it receives each one. The reader is
// behind when `conflate_after` updates wait, or when its owner says so (set_reader_behind:
// the write in flight has not completed for too long); then a change of a level that is
// already queued supersedes it: the queued update is removed and the new one appended,
// marked `conflated`. The queue therefore stays in sequence order (a client that resumes
// from the highest sequence it has seen misses nothing) and, while behind, grows only with
// distinct levels. More than `max_queued` updates waiting means the reader is hopelessly
// behind: Push reports overflow and the stream must end.
//
// Not thread-safe: the owning stream serializes access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::core {

struct QueueLimits {
  // Updates waiting before a stream's changes are conflated per level.
  size_t conflate_after = 1024;
  // Updates waiting before the reader is ended as too slow (>= conflate_after).
  size_t max_queued = 10000;
};

// The error that ends a stream whose reader is more than limits.max_queued updates behind
// (the same message on every kind of stream).
absl::Status SlowReaderError(const QueueLimits& limits);

class StockUpdateQueue {
 public:
  explicit StockUpdateQueue(QueueLimits limits);
  StockUpdateQueue(const StockUpdateQueue&) = delete;
  StockUpdateQueue& operator=(const StockUpdateQueue&) = delete;

  // Appends the update of `level` committed at `sequence`, which is not below any queued
  // update's. Returns false when the queue now overflows.
  bool Push(const inventory::v1::StockLevel& level, uint64_t sequence,
            inventory::v1::StockUpdate::Kind kind = inventory::v1::StockUpdate::KIND_CHANGE);
  // Places a snapshot row of `level` taken at `cut` (KIND_SNAPSHOT, sequence = cut) after
  // every queued update with a sequence <= cut and before the later ones. Returns false
  // when the queue now overflows.
  bool InsertSnapshotRow(const inventory::v1::StockLevel& level, uint64_t cut);
  // Removes the updates with a sequence <= `through` whose level `drop(sku, location)`
  // selects (changes that a snapshot taken at `through` already contains).
  void DropThrough(uint64_t through,
                   const std::function<bool(std::string_view, std::string_view)>& drop);

  // The owner's view of the reader (its write in flight is old): while true, Push conflates
  // whatever the queue's length.
  void set_reader_behind(bool behind) { reader_behind_ = behind; }

  // The oldest update, or nullopt.
  std::optional<inventory::v1::StockUpdate> Pop();
  void Clear();

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // Updates superseded so far.
  uint64_t conflated() const { return conflated_; }

 private:
  // A queued update in plain fields (~150 bytes with its key and list links; a StockUpdate
  // message would be ~350 in five allocations).
  struct Entry {
    std::string key;  // LevelKey(sku, location)
    int64_t on_hand = 0;
    int64_t reserved = 0;
    int64_t available = 0;
    uint64_t version = 0;
    int64_t updated_at_ms = 0;
    uint64_t level_sequence = 0;
    uint64_t sequence = 0;
    inventory::v1::StockUpdate::Kind kind = inventory::v1::StockUpdate::KIND_UNSPECIFIED;
    bool allow_backorder = false;
    bool conflated = false;
  };
  using Entries = std::list<Entry>;

  static Entry MakeEntry(const inventory::v1::StockLevel& level, uint64_t sequence,
                         inventory::v1::StockUpdate::Kind kind);
  // Erases `it`, and its level's index entry when it is that level's newest update.
  void Erase(Entries::iterator it);
  bool WithinLimit() const { return entries_.size() <= limits_.max_queued; }

  const QueueLimits limits_;
  Entries entries_;  // sequence order
  // Each queued level's newest update; keys view the entries' own key strings (list nodes
  // never move).
  absl::flat_hash_map<std::string_view, Entries::iterator> newest_;
  uint64_t conflated_ = 0;
  bool reader_behind_ = false;
};

}  // namespace feed::core

#include "table_overlay.h"

#include <algorithm>

namespace feed::core {

using storage::Table;

namespace {

// Memory of one slot in a generation's tree (key and slot views, node overhead), counted with
// the log's bytes so that checkpoint_bytes bounds what the overlay holds.
constexpr size_t kSlotBytes = 64;

bool HasPrefix(std::string_view key, std::string_view prefix) {
  return key.substr(0, prefix.size()) == prefix;
}

}  // namespace

// The overlay's generations (newest first) over a base view: what a read sees.
class TableOverlay::LayeredView : public storage::ReadView {
 public:
  LayeredView(const storage::ReadView& base, std::vector<const Generation*> layers)
      : base_(base), layers_(std::move(layers)) {}

  absl::StatusOr<std::optional<std::string>> Get(Table table, std::string_view key) const override {
    for (const Generation* g : layers_) {
      const TableMap& m = g->tables[static_cast<int>(table)];
      if (auto it = m.find(key); it != m.end()) {
        if (it->second.deleted) return std::optional<std::string>();
        return std::optional<std::string>(std::string(it->second.value));
      }
    }
    return base_.Get(table, key);
  }

  // The base's entries and the layers' merged in key order; a layer's slot replaces the
  // base's entry of its key (or hides it, when deleted), a newer layer's an older one's.
  absl::Status Scan(Table table, std::string_view start, std::string_view prefix,
                    const storage::ScanFn& fn) const override {
    const std::string_view from = start < prefix ? prefix : start;
    struct Cursor {
      TableMap::const_iterator it, end;
    };
    std::vector<Cursor> cursors;
    for (const Generation* g : layers_) {
      const TableMap& m = g->tables[static_cast<int>(table)];
      cursors.push_back({m.lower_bound(from), m.end()});
    }
    // The smallest key among the layers, the newest layer's slot for it; the others at that
    // key are passed over.
    auto next = [&]() -> std::optional<std::pair<std::string_view, Slot>> {
      const Cursor* best = nullptr;
      for (const auto& c : cursors) {
        if (c.it == c.end || !HasPrefix(c.it->first, prefix)) continue;
        if (best == nullptr || c.it->first < best->it->first) best = &c;
      }
      if (best == nullptr) return std::nullopt;
      return std::make_pair(best->it->first, best->it->second);
    };
    auto advance_past = [&](std::string_view key) {
      for (auto& c : cursors) {
        if (c.it != c.end && c.it->first == key) ++c.it;
      }
    };
    bool stopped = false;
    // Emits the layers' live slots below `bound` (all of them without one).
    auto emit_below = [&](std::optional<std::string_view> bound) {
      while (auto slot = next()) {
        if (bound && slot->first >= *bound) return true;
        advance_past(slot->first);
        if (slot->second.deleted) continue;
        if (!fn(slot->first, slot->second.value)) return false;
      }
      return true;
    };
    absl::Status s =
        base_.Scan(table, start, prefix, [&](std::string_view key, std::string_view v) {
          if (!emit_below(key)) {
            stopped = true;
            return false;
          }
          if (auto slot = next(); slot && slot->first == key) {
            advance_past(key);
            if (slot->second.deleted) return true;
            if (!fn(key, slot->second.value)) {
              stopped = true;
              return false;
            }
            return true;
          }
          if (!fn(key, v)) {
            stopped = true;
            return false;
          }
          return true;
        });
    if (!s.ok() || stopped) return s;
    emit_below(std::nullopt);
    return absl::OkStatus();
  }

 private:
  const storage::ReadView& base_;
  const std::vector<const Generation*> layers_;
};

// A snapshot of the store under a private copy of some of the overlay's records.
class TableOverlay::SnapshotView : public storage::ReadView {
 public:
  SnapshotView(std::unique_ptr<storage::ReadView> base, std::unique_ptr<Generation> copy)
      : base_(std::move(base)), copy_(std::move(copy)), view_(*base_, {copy_.get()}) {}
  absl::StatusOr<std::optional<std::string>> Get(Table table, std::string_view key) const override {
    return view_.Get(table, key);
  }
  absl::Status Scan(Table table, std::string_view start, std::string_view prefix,
                    const storage::ScanFn& fn) const override {
    return view_.Scan(table, start, prefix, fn);
  }

 private:
  std::unique_ptr<storage::ReadView> base_;
  std::unique_ptr<Generation> copy_;
  LayeredView view_;
};

size_t TableOverlay::Apply(std::shared_ptr<const MutationLog> log, uint64_t last_sequence) {
  absl::MutexLock lock(&mu_);
  for (const auto& op : log->ops()) {
    TableMap& m = active_.tables[static_cast<int>(op.table)];
    const std::string_view key = log->key(op);
    auto it = m.find(key);
    if (op.deleted) {
      if (it != m.end() && it->second.fresh) {
        m.erase(it);  // put and delete both before a checkpoint: the table never sees either
      } else if (it != m.end()) {
        it->second = Slot{{}, true, false};
      } else {
        m.emplace(key, Slot{{}, true, false});
      }
      continue;
    }
    if (it != m.end()) {
      // The slot's key views the older log, which this generation keeps too.
      it->second = Slot{log->value(op), false, it->second.fresh};
    } else {
      m.emplace(key, Slot{log->value(op), false, op.fresh});
    }
  }
  // The log's bytes and, roughly, a tree slot per record: what the generation holds in memory.
  active_.bytes += log->bytes() + log->ops().size() * kSlotBytes;
  active_.logs.push_back(std::move(log));
  active_.last_sequence = last_sequence;
  return active_.bytes;
}

absl::StatusOr<std::optional<std::string>> TableOverlay::Get(Table table,
                                                             std::string_view key) const {
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const Generation* g : {&active_, static_cast<const Generation*>(frozen_.get())}) {
      if (g == nullptr) continue;
      const TableMap& m = g->tables[static_cast<int>(table)];
      if (auto it = m.find(key); it != m.end()) {
        if (it->second.deleted) return std::optional<std::string>();
        return std::optional<std::string>(std::string(it->second.value));
      }
    }
  }
  // Not in the overlay now: the table holds what was committed last (a checkpoint writes a
  // generation into the tables before it drops it).
  return store_.Get(table, key);
}

absl::Status TableOverlay::Read(
    const std::function<absl::Status(const storage::ReadView&, uint64_t)>& read) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<const Generation*> layers{&active_};
  if (frozen_) layers.push_back(frozen_.get());
  // The store itself, not a snapshot: while the lock is held only a checkpoint writes to the
  // tables, and only records that the frozen generation holds and hides.
  LayeredView view(store_, std::move(layers));
  return read(view, active_.last_sequence);
}

std::unique_ptr<storage::ReadView> TableOverlay::Snapshot(Table table,
                                                          const std::vector<KeyRange>& ranges,
                                                          uint64_t* as_of_sequence) const {
  auto copy = std::make_unique<Generation>();
  auto owner = std::make_shared<MutationLog>();
  std::vector<std::pair<std::string_view, Slot>> selected;
  absl::ReaderMutexLock lock(&mu_);
  // Oldest first, so that the newer generation's slot of a key replaces the older one's.
  for (const Generation* g : {static_cast<const Generation*>(frozen_.get()), &active_}) {
    if (g == nullptr) continue;
    const TableMap& m = g->tables[static_cast<int>(table)];
    auto take = [&](TableMap::const_iterator it) {
      if (it->second.deleted) {
        owner->Delete(table, it->first);
      } else {
        owner->Put(table, it->first, it->second.value);
      }
    };
    if (ranges.empty()) {
      for (auto it = m.begin(); it != m.end(); ++it) take(it);
      continue;
    }
    for (const auto& r : ranges) {
      if (!r.prefix) {
        if (auto it = m.find(r.key); it != m.end()) take(it);
        continue;
      }
      for (auto it = m.lower_bound(r.key); it != m.end() && HasPrefix(it->first, r.key); ++it) {
        take(it);
      }
    }
  }
  // The owner's buffer is complete now: the slots may view it.
  TableMap& m = copy->tables[static_cast<int>(table)];
  for (const auto& op : owner->ops()) {
    m.insert_or_assign(owner->key(op), Slot{owner->value(op), op.deleted, false});
  }
  copy->logs.push_back(owner);
  *as_of_sequence = active_.last_sequence;
  return std::make_unique<SnapshotView>(store_.Snapshot(), std::move(copy));
}

bool TableOverlay::Freeze() {
  absl::MutexLock lock(&mu_);
  if (frozen_ || active_.empty()) return false;
  frozen_ = std::make_unique<Generation>(std::move(active_));
  active_ = Generation{};
  active_.last_sequence = frozen_->last_sequence;
  return true;
}

absl::StatusOr<uint64_t> TableOverlay::WriteFrozen(
    storage::WriteGroup& group, size_t chunk,
    const std::function<absl::Status(storage::WriteGroup&)>& flush) const {
  // The frozen generation does not change until DropFrozen, which only its writer calls.
  const Generation* frozen;
  {
    absl::ReaderMutexLock lock(&mu_);
    frozen = frozen_.get();
  }
  if (frozen == nullptr) return 0;
  for (int t = 0; t < storage::kTableCount; ++t) {
    for (const auto& [key, slot] : frozen->tables[t]) {
      if (group.Count() >= chunk) {
        if (absl::Status s = flush(group); !s.ok()) return s;
      }
      if (slot.deleted) {
        group.Delete(static_cast<Table>(t), key);
      } else {
        group.Put(static_cast<Table>(t), key, slot.value);
      }
    }
  }
  return frozen->last_sequence;
}

void TableOverlay::DropFrozen() {
  std::unique_ptr<Generation> dropped;
  {
    absl::MutexLock lock(&mu_);
    dropped = std::move(frozen_);
  }
  // Freed outside the lock: a large generation takes a while.
}

uint64_t TableOverlay::last_sequence() const {
  absl::ReaderMutexLock lock(&mu_);
  return active_.last_sequence;
}

void TableOverlay::SetLastSequence(uint64_t last_sequence) {
  absl::MutexLock lock(&mu_);
  active_.last_sequence = std::max(active_.last_sequence, last_sequence);
}

TableOverlay::Size TableOverlay::size() const {
  absl::ReaderMutexLock lock(&mu_);
  Size s;
  for (const Generation* g : {&active_, static_cast<const Generation*>(frozen_.get())}) {
    if (g == nullptr) continue;
    for (const auto& m : g->tables) s.records += m.size();
    s.bytes += g->bytes;
  }
  return s;
}

size_t TableOverlay::active_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return active_.bytes;
}

}  // namespace feed::core

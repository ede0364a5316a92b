#include "storage/memory_store.h"

#include <chrono>
#include <thread>
#include <variant>
#include <vector>

namespace feed::storage {
namespace {

struct Op {
  enum Kind { kPut, kDelete, kDeleteRange } kind;
  Table table;
  std::string key;
  std::string value;  // the range end for kDeleteRange
};

class MemoryWriteGroup : public WriteGroup {
 public:
  void Put(Table t, std::string_view k, std::string_view v) override {
    bytes_ += k.size() + v.size();
    ops_.push_back({Op::kPut, t, std::string(k), std::string(v)});
    ++counts_.puts;
  }
  void Delete(Table t, std::string_view k) override {
    bytes_ += k.size();
    ops_.push_back({Op::kDelete, t, std::string(k), {}});
    ++counts_.deletes;
  }
  void DeleteRange(Table t, std::string_view b, std::string_view e) override {
    bytes_ += b.size() + e.size();
    ops_.push_back({Op::kDeleteRange, t, std::string(b), std::string(e)});
    ++counts_.range_deletes;
  }
  size_t Count() const override { return ops_.size(); }
  size_t ByteSize() const override { return bytes_; }
  OperationCounts Operations() const override { return counts_; }
  void Clear() override {
    ops_.clear();
    bytes_ = 0;
    counts_ = {};
  }
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
  size_t bytes_ = 0;
  OperationCounts counts_;
};

absl::StatusOr<std::optional<std::string>> GetFrom(const MemoryStore::Tables& tables, Table t,
                                                   std::string_view key) {
  const auto& m = tables[static_cast<int>(t)];
  auto it = m.find(key);
  if (it == m.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

absl::Status ScanFrom(const MemoryStore::Tables& tables, Table t, std::string_view start,
                      std::string_view prefix, const ScanFn& fn) {
  const auto& m = tables[static_cast<int>(t)];
  std::string_view from = start < prefix ? prefix : start;
  for (auto it = m.lower_bound(from); it != m.end(); ++it) {
    if (!prefix.empty() && std::string_view(it->first).substr(0, prefix.size()) != prefix) break;
    if (!fn(it->first, it->second)) break;
  }
  return absl::OkStatus();
}

class MemoryView : public ReadView {
 public:
  explicit MemoryView(MemoryStore::Tables tables) : tables_(std::move(tables)) {}
  absl::StatusOr<std::optional<std::string>> Get(Table t, std::string_view k) const override {
    return GetFrom(tables_, t, k);
  }
  absl::Status Scan(Table t, std::string_view start, std::string_view prefix,
                    const ScanFn& fn) const override {
    return ScanFrom(tables_, t, start, prefix, fn);
  }

 private:
  MemoryStore::Tables tables_;
};

}  // namespace

std::unique_ptr<WriteGroup> MemoryStore::NewWriteGroup() {
  return std::make_unique<MemoryWriteGroup>();
}

absl::Status MemoryStore::Commit(WriteGroup& group, CommitMode) {
  auto& g = static_cast<MemoryWriteGroup&>(group);
  if (int delay = commit_delay_ms_.load(); delay > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  std::lock_guard lock(mu_);
  if (!next_commit_status_.ok() && commits_before_failure_ > 0) {
    --commits_before_failure_;
  } else if (!next_commit_status_.ok()) {
    absl::Status s = std::move(next_commit_status_);
    next_commit_status_ = absl::OkStatus();
    return s;
  }
  for (const Op& op : g.ops()) {
    auto& m = tables_[static_cast<int>(op.table)];
    switch (op.kind) {
      case Op::kPut:
        m[op.key] = op.value;
        break;
      case Op::kDelete:
        m.erase(op.key);
        break;
      case Op::kDeleteRange:
        m.erase(m.lower_bound(op.key), m.lower_bound(op.value));
        break;
    }
  }
  ++commits_;
  written_.AddCommit(g.Operations());
  return absl::OkStatus();
}

std::unique_ptr<ReadView> MemoryStore::Snapshot() const {
  std::lock_guard lock(mu_);
  return std::make_unique<MemoryView>(tables_);
}

absl::StatusOr<std::optional<std::string>> MemoryStore::Get(Table t, std::string_view k) const {
  std::lock_guard lock(mu_);
  return GetFrom(tables_, t, k);
}

absl::Status MemoryStore::Scan(Table t, std::string_view start, std::string_view prefix,
                               const ScanFn& fn) const {
  // Copy the range first so fn may call back into the store.
  std::vector<std::pair<std::string, std::string>> rows;
  {
    std::lock_guard lock(mu_);
    (void)ScanFrom(tables_, t, start, prefix, [&](std::string_view k, std::string_view v) {
      rows.emplace_back(k, v);
      return true;
    });
  }
  for (const auto& [k, v] : rows) {
    if (!fn(k, v)) break;
  }
  return absl::OkStatus();
}

void MemoryStore::FailCommitAfter(size_t successes, absl::Status status) {
  std::lock_guard lock(mu_);
  commits_before_failure_ = successes;
  next_commit_status_ = std::move(status);
}

size_t MemoryStore::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

size_t MemoryStore::Size(Table t) const {
  std::lock_guard lock(mu_);
  return tables_[static_cast<int>(t)].size();
}

uint64_t MemoryStore::ApproximateBytes(Table table) const {
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [k, v] : tables_[static_cast<int>(table)]) bytes += k.size() + v.size();
  return bytes;
}

}  // namespace feed::storage

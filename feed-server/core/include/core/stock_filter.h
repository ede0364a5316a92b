// Which stock levels a stream wants: whole SKUs (a key with an empty location) and exact
// (sku, location) pairs. Matching allocates nothing: it runs for every event a stream sees.
//
// Not thread-safe: the owning stream serializes access.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "inventory/v1/inventory.pb.h"

namespace feed::core {

class StockFilter {
 public:
  // True when the key was not in the filter yet.
  bool Add(const inventory::v1::StockKey& key);
  void Remove(const inventory::v1::StockKey& key);
  void Clear();
  // Adds every key of `other`.
  void Merge(const StockFilter& other);
  bool Contains(const inventory::v1::StockKey& key) const;

  // False for an empty filter: whether an empty filter means "everything" is the caller's
  // rule.
  bool Matches(std::string_view sku, std::string_view location) const;
  bool Matches(const inventory::v1::StockLevel& level) const {
    return Matches(level.sku(), level.location());
  }

  // The distinct SKUs the filter names (the change feed's delivery keys).
  std::vector<std::string> Skus() const;
  // Number of keys.
  size_t size() const { return skus_.size() + exact_count_; }
  bool empty() const { return size() == 0; }

 private:
  absl::flat_hash_set<std::string> skus_;
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> exact_;  // sku -> locations
  size_t exact_count_ = 0;
};

}  // namespace feed::core

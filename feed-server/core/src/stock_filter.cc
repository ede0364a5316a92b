#include "core/stock_filter.h"

namespace feed::core {

bool StockFilter::Add(const inventory::v1::StockKey& key) {
  if (key.location().empty()) return skus_.insert(key.sku()).second;
  bool added = exact_[key.sku()].insert(key.location()).second;
  exact_count_ += added ? 1 : 0;
  return added;
}

void StockFilter::Remove(const inventory::v1::StockKey& key) {
  if (key.location().empty()) {
    skus_.erase(key.sku());
    return;
  }
  auto it = exact_.find(key.sku());
  if (it == exact_.end()) return;
  exact_count_ -= it->second.erase(key.location());
  if (it->second.empty()) exact_.erase(it);
}

void StockFilter::Clear() {
  skus_.clear();
  exact_.clear();
  exact_count_ = 0;
}

void StockFilter::Merge(const StockFilter& other) {
  skus_.insert(other.skus_.begin(), other.skus_.end());
  for (const auto& [sku, locations] : other.exact_) {
    auto& mine = exact_[sku];
    for (const auto& location : locations) exact_count_ += mine.insert(location).second ? 1 : 0;
  }
}

bool StockFilter::Contains(const inventory::v1::StockKey& key) const {
  if (key.location().empty()) return skus_.contains(key.sku());
  auto it = exact_.find(key.sku());
  return it != exact_.end() && it->second.contains(key.location());
}

bool StockFilter::Matches(std::string_view sku, std::string_view location) const {
  // Debian's abseil has its own string_view: convert, so the lookup stays heterogeneous
  // (no std::string built per event).
  const absl::string_view s(sku.data(), sku.size());
  if (skus_.contains(s)) return true;
  auto it = exact_.find(s);
  return it != exact_.end() &&
         it->second.contains(absl::string_view(location.data(), location.size()));
}

std::vector<std::string> StockFilter::Skus() const {
  std::vector<std::string> out(skus_.begin(), skus_.end());
  for (const auto& [sku, locations] : exact_) {
    if (!skus_.contains(sku)) out.push_back(sku);
  }
  return out;
}

}  // namespace feed::core

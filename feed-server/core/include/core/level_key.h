// The key of one stock level, (sku, location) -> "sku\0location": the RocksDB key of the
// stock table and the in-memory key everywhere a level is looked up or conflated. NUL never
// appears in a valid id, and it sorts first, so a SKU's locations are one prefix scan
// (LevelKey(sku, "") is that prefix).
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace feed::core {

inline std::string LevelKey(std::string_view sku, std::string_view location) {
  std::string key;
  key.reserve(sku.size() + 1 + location.size());
  key.append(sku);
  key.push_back('\0');
  key.append(location);
  return key;
}

// The inverse: {sku, location} viewing into `key`.
inline std::pair<std::string_view, std::string_view> SplitLevelKey(std::string_view key) {
  size_t zero = key.find('\0');
  return {key.substr(0, zero), key.substr(zero + 1)};
}

}  // namespace feed::core

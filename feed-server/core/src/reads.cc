#include "reads.h"

#include "core/level_key.h"

namespace feed::core {

using inventory::v1::StockLevel;
using storage::Table;

absl::StatusOr<StockLevel> ParseLevel(std::string_view value) {
  StockLevel level;
  if (!level.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError("stock level record is corrupt");
  }
  return level;
}

absl::StatusOr<bool> LevelReader::Next(
    size_t max, std::vector<StockLevel>* out,
    const std::function<void(const inventory::v1::StockKey&)>& missing) {
  size_t added = 0;
  absl::Status parse_error;
  // Takes the scanned levels after resume_after_, until `max`.
  auto take = [&](std::string_view key, std::string_view value) {
    if (key == resume_after_) return true;
    auto level = ParseLevel(value);
    if (!level.ok()) {
      parse_error = level.status();
      return false;
    }
    out->push_back(*std::move(level));
    resume_after_ = std::string(key);
    found_ = true;
    return ++added < max;
  };
  if (keys_.empty()) {
    if (done_) return false;
    if (auto s = view_.Scan(Table::kStock, resume_after_, "", take); !s.ok()) return s;
    if (!parse_error.ok()) return parse_error;
    done_ = added < max;
    return !done_;
  }
  while (next_key_ < keys_.size() && added < max) {
    const auto& key = keys_[next_key_];
    if (key.location().empty()) {
      const std::string prefix = LevelKey(key.sku(), "");
      const size_t before = added;
      if (auto s = view_.Scan(Table::kStock, resume_after_.empty() ? prefix : resume_after_, prefix,
                              take);
          !s.ok()) {
        return s;
      }
      if (!parse_error.ok()) return parse_error;
      if (added > before && added == max) return true;  // more of this prefix may follow
    } else {
      auto value = view_.Get(Table::kStock, LevelKey(key.sku(), key.location()));
      if (!value.ok()) return value.status();
      if (value->has_value()) {
        auto level = ParseLevel(**value);
        if (!level.ok()) return level.status();
        out->push_back(*std::move(level));
        found_ = true;
        ++added;
      }
    }
    if (!found_ && missing) missing(key);
    ++next_key_;
    resume_after_.clear();
    found_ = false;
  }
  return next_key_ < keys_.size();
}

}  // namespace feed::core

#include "watch_table.h"

#include "fmt/format.h"

namespace feedctl {

void WatchTable::Apply(const inventory::v1::StockLevel& level) {
  auto key = std::make_pair(level.sku(), level.location());
  auto [it, inserted] = levels_.try_emplace(key, level);
  if (!inserted) {
    if (level.version() < it->second.version()) return;
    it->second = level;
  }
  last_changed_ = std::move(key);
  last_sequence_ = std::max(last_sequence_, level.sequence());
  ++changes_;
}

std::string WatchTable::Render(const std::string& title, int rows, bool color) const {
  std::string out = fmt::format("{}  ({} levels, {} updates, sequence {})\n", title, levels_.size(),
                                changes_, last_sequence_);
  out += fmt::format("{:<24} {:<14} {:>10} {:>10} {:>10} {:>8}\n", "SKU", "LOCATION", "ON_HAND",
                     "RESERVED", "AVAILABLE", "VERSION");
  int shown = 0;
  for (const auto& [key, l] : levels_) {
    if (shown == rows) break;
    const bool last = key == last_changed_;
    const std::string row =
        fmt::format("{:<24} {:<14} {:>10} {:>10} {:>10} {:>8}", l.sku(), l.location(), l.on_hand(),
                    l.reserved(), l.available(), l.version());
    if (last && color) {
      out += "\x1b[7m" + row + "\x1b[0m\n";
    } else {
      out += row + (last ? " *\n" : "\n");
    }
    ++shown;
  }
  if (static_cast<size_t>(shown) < levels_.size()) {
    out += fmt::format("... {} more\n", levels_.size() - static_cast<size_t>(shown));
  }
  return out;
}

}  // namespace feedctl

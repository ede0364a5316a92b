// The live stock table of `feedctl stock watch`: the newest level of every watched key, sorted
// by SKU then location, drawn for a terminal with the last change highlighted. Pure: the
// stream and the terminal are watch.cc's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "inventory/v1/inventory.pb.h"

namespace feedctl {

class WatchTable {
 public:
  // A level from the snapshot or a change: replaces what the table had for its key (an
  // older version, e.g. replayed after a reconnect, is ignored).
  void Apply(const inventory::v1::StockLevel& level);
  // The whole screen: a title line, a header, then up to `rows` levels (with a line saying how
  // many more there are), the last one changed in reverse video when `color`.
  std::string Render(const std::string& title, int rows, bool color) const;

  size_t size() const { return levels_.size(); }
  uint64_t last_sequence() const { return last_sequence_; }

 private:
  std::map<std::pair<std::string, std::string>, inventory::v1::StockLevel> levels_;
  std::pair<std::string, std::string> last_changed_;
  uint64_t last_sequence_ = 0;
  uint64_t changes_ = 0;
};

}  // namespace feedctl

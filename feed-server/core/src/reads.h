// Reads of committed state, on any thread, never through the writer: the store only ever
// holds committed state.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inventory/v1/inventory.pb.h"
#include "storage/store.h"

namespace feed::core {

// The stock levels matching `keys` in one consistent view, read in chunks so that a stream
// can send a large snapshot without holding it in memory. No keys = every level; a key with
// an empty location = every location of its SKU (one prefix scan). Serves GetStock and the
// stream snapshots alike. Not thread-safe.
class LevelReader {
 public:
  LevelReader(const storage::ReadView& view, std::vector<inventory::v1::StockKey> keys)
      : view_(view), keys_(std::move(keys)) {}

  // Appends up to `max` levels; false once every level has been read. `missing`, when set,
  // is called for each requested key that matches no level.
  absl::StatusOr<bool> Next(
      size_t max, std::vector<inventory::v1::StockLevel>* out,
      const std::function<void(const inventory::v1::StockKey&)>& missing = {});

 private:
  const storage::ReadView& view_;
  const std::vector<inventory::v1::StockKey> keys_;
  size_t next_key_ = 0;
  std::string resume_after_;  // the last key returned inside the current scan
  bool found_ = false;        // the current key has matched a level
  bool done_ = false;         // no keys: the full scan is over
};

// The StockLevel stored as `value`, or DATA_LOSS.
absl::StatusOr<inventory::v1::StockLevel> ParseLevel(std::string_view value);

}  // namespace feed::core

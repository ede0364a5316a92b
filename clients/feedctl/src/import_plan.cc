#include "import_plan.h"

#include <algorithm>
#include <unordered_map>

namespace feedctl {

std::vector<ImportBatch> PlanImportBatches(const std::vector<CsvAdjustment>& adjustments,
                                           uint32_t shard_count, size_t batch_size) {
  batch_size = std::max<size_t>(1, batch_size);
  std::vector<ImportBatch> batches;
  std::unordered_map<uint32_t, size_t> open;  // shard -> its batch still filling up
  for (size_t i = 0; i < adjustments.size(); ++i) {
    const uint32_t shard = feed::ShardOf(adjustments[i].request.sku(), shard_count);
    auto it = open.find(shard);
    if (it == open.end() || batches[it->second].lines.size() == batch_size) {
      batches.push_back({shard, {}});
      it = open.insert_or_assign(shard, batches.size() - 1).first;
    }
    batches[it->second].lines.push_back(i);
  }
  return batches;
}

}  // namespace feedctl

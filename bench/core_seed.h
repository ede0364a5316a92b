// Stock for the benchmarks that drive an InventoryCore directly: SKUs "sku-0" .. "sku-<n-1>",
// each with 1,000,000 on hand, so that no reservation of a run sells out.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/inventory_core.h"

namespace feed::bench {

inline std::string SeedSku(int64_t i) { return "sku-" + std::to_string(i); }

inline void SeedStock(core::InventoryCore& core, int skus) {
  for (int i = 0; i < skus; ++i) {
    inventory::v1::AdjustStockRequest a;
    a.set_sku(SeedSku(i));
    a.set_mode(inventory::v1::ADJUST_MODE_SET);
    a.set_quantity(1'000'000);
    if (!core::CallSync(core, &core::InventoryCore::AdjustStock, a).ok()) std::abort();
  }
}

}  // namespace feed::bench

// A FileSystem for power-loss tests: appended bytes stay in this process's memory until the
// file is synced (Sync/Fsync) or closed. SIGKILL then loses exactly what a power cut would
// lose: everything written since the last sync. Testing only (RocksDbOptions::
// simulate_power_loss).
#pragma once

#include <memory>

#include "rocksdb/file_system.h"

namespace feed::storage::internal {

std::shared_ptr<rocksdb::FileSystem> NewPowerLossFileSystem(
    std::shared_ptr<rocksdb::FileSystem> base);

}  // namespace feed::storage::internal

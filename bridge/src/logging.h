// The bridge module's logger ("bridge"). Looked up per line (lines are rare), so that it
// follows a logging setup made after the relay started.
#pragma once

#include "common/module_logger.h"

namespace feed::bridge::internal {

inline std::shared_ptr<spdlog::logger> BridgeLogger() { return ModuleLogger("bridge"); }

}  // namespace feed::bridge::internal

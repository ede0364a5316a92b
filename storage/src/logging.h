// The storage module's logger ("storage"). Looked up per line (lines are rare), so that it
// follows a logging setup made after the store opened.
#pragma once

#include "common/module_logger.h"

namespace feed::storage {

inline std::shared_ptr<spdlog::logger> Log() { return ModuleLogger("storage"); }

}  // namespace feed::storage

// The core module's logger ("core"). Looked up per line (lines are rare), so that it
// follows a logging setup made after the core started.
#pragma once

#include "common/module_logger.h"

namespace feed::core {

inline std::shared_ptr<spdlog::logger> CoreLogger() { return ModuleLogger("core"); }

}  // namespace feed::core

// The server module's logger ("server"); the access log has its own ("rpc", AccessLog).
// Looked up per line (lines are rare), so that it follows the logging setup of the moment.
#pragma once

#include "common/module_logger.h"

namespace feed::server {

inline std::shared_ptr<spdlog::logger> ServerLog() { return ModuleLogger("server"); }

}  // namespace feed::server

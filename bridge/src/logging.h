// The bridge module's spdlog logger ("bridge").
#pragma once

#include <memory>

#include "spdlog/spdlog.h"

namespace feed::bridge::internal {

// Returns the logger registered as "bridge"; when none is registered, registers a clone of the
// default logger (same sinks and format) under that name. An application that wants its own
// format for the bridge registers a "bridge" logger before creating the relay. Thread-safe.
std::shared_ptr<spdlog::logger> BridgeLogger();

}  // namespace feed::bridge::internal

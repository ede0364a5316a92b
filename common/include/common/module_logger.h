// One spdlog logger per module ("core", "storage", "server", "bridge"), so that a line says
// where it comes from without a text prefix, and an application can give a module its own
// level or sinks by registering a logger of that name first.
#pragma once

#include <memory>
#include <string>

#include "spdlog/spdlog.h"

namespace feed {

// The logger registered under `name`; when none is, registers a clone of the default logger
// (same sinks and format) under it. Thread-safe. Loggers made before the application sets
// up logging follow the default logger of that moment: set up logging first.
std::shared_ptr<spdlog::logger> ModuleLogger(const std::string& name);

}  // namespace feed

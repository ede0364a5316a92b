#include "common/module_logger.h"

#include <mutex>

namespace feed {

std::shared_ptr<spdlog::logger> ModuleLogger(const std::string& name) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto logger = spdlog::get(name)) return logger;
  auto logger = spdlog::default_logger()->clone(name);
  try {
    spdlog::register_logger(logger);
  } catch (const spdlog::spdlog_ex&) {
    if (auto existing = spdlog::get(name)) return existing;  // registered meanwhile
  }
  return logger;
}

}  // namespace feed

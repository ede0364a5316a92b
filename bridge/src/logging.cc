#include "logging.h"

#include <mutex>

namespace feed::bridge::internal {

std::shared_ptr<spdlog::logger> BridgeLogger() {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto logger = spdlog::get("bridge")) return logger;
  auto logger = spdlog::default_logger()->clone("bridge");
  try {
    spdlog::register_logger(logger);
  } catch (const spdlog::spdlog_ex&) {
    // Registered meanwhile by someone else: use theirs.
    if (auto existing = spdlog::get("bridge")) return existing;
  }
  return logger;
}

}  // namespace feed::bridge::internal

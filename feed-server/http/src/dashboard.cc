#include "dashboard.h"

#include "nlohmann/json.hpp"
#include "transcoding.h"

namespace feed::http {
namespace {

nlohmann::json Events(const std::vector<core::EventPtr>& events) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : events) out.push_back(nlohmann::json::parse(ToJson(*e)));
  return out;
}

bool SafeName(std::string_view name) {
  if (name.empty() || name.find("..") != std::string_view::npos) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string DashboardStatusJson(const server::ServerStatus& s, int64_t now_ms) {
  const core::CoreStats& c = s.core;
  nlohmann::json j = {
      {"time_ms", now_ms},
      {"serving", s.serving},
      {"last_sequence", c.last_sequence},
      {"commands", c.commands},
      {"events", c.events},
      {"batches", c.batches},
      {"reservations_made", c.reservations_made},
      {"open_holds", c.held_reservations},
      {"stock_levels", c.stock_levels},
      {"writer_queue_depth", c.queue_depth},
      {"unpublished_events", c.unpublished_events},
      {"uncheckpointed_records", c.overlay_records},
      {"checkpoint_sequence", c.checkpoint_sequence},
      {"kafka",
       {{"configured", s.kafka_configured},
        {"reachable", s.kafka_reachable},
        {"outbox_depth", s.outbox_depth},
        {"oldest_undelivered_age_ms", s.oldest_undelivered_age_ms},
        {"lag_p50_ms", s.kafka_lag_p50_ms},
        {"lag_p99_ms", s.kafka_lag_p99_ms},
        {"delivered", s.kafka_delivered}}},
      {"recent_reservations", Events(s.recent_reservations)},
      {"recent_orders", Events(s.recent_orders)},
  };
  return j.dump();
}

std::optional<std::string> DashboardFile(const HttpOptions& options, std::string_view path) {
  constexpr std::string_view kRoot = "/dashboard/", kUplot = "/dashboard/uplot/";
  if (path.starts_with(kUplot)) {
    std::string_view name = path.substr(kUplot.size());
    if (options.uplot_dir.empty() || !SafeName(name)) return std::nullopt;
    return options.uplot_dir + "/" + std::string(name);
  }
  if (!path.starts_with(kRoot) || options.dashboard_dir.empty()) return std::nullopt;
  std::string_view name = path.substr(kRoot.size());
  if (name.empty()) name = "index.html";
  if (!SafeName(name)) return std::nullopt;
  return options.dashboard_dir + "/" + std::string(name);
}

}  // namespace feed::http

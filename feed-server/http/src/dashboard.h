// The dashboard's server side: /dashboard/status.json (the process's state as JSON, for the
// page to poll) and which file a /dashboard/ path names. The page itself is plain HTML and
// JavaScript in feed-server/http/dashboard/, its chart library uPlot from npm.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/options.h"
#include "server/status.h"

namespace feed::http {

// The status as one JSON object: counters, Kafka relay state, recent events (proto3 JSON).
std::string DashboardStatusJson(const server::ServerStatus& status, int64_t now_ms);

// The file that `path` (under /dashboard/) names: a page of options.dashboard_dir, or uPlot's
// under /dashboard/uplot/; nothing for a path that leaves those folders or names a folder.
std::optional<std::string> DashboardFile(const HttpOptions& options, std::string_view path);

}  // namespace feed::http

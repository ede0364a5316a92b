// The HTTP/JSON gateway's options (flags --http-*, README "Limits and configuration").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace feed::http {

struct HttpOptions {
  // Empty: the gateway is off.
  std::string listen = "127.0.0.1:8081";
  int threads = 1;
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
  size_t max_connections = 10000;
  int64_t idle_timeout_ms = 60000;
  int64_t read_timeout_ms = 10000;
  int64_t write_timeout_ms = 30000;
  // An SSE stream with nothing to send writes a `: keep-alive` comment this often, so that a
  // client that went away is noticed and its stream slot freed (0: never).
  int64_t sse_heartbeat_ms = 15000;
  // Unknown JSON fields and query parameters are rejected (400) unless this is set.
  bool ignore_unknown_fields = false;
  // swagger-ui-dist's folder (served at /swaggerui/) and the OpenAPI document generated
  // from proto/ (served at /openapi.json); empty: not served. The build fills both in.
  std::string swagger_ui_dir;
  std::string openapi_file;
  // The dashboard's pages (feed-server/http/dashboard, served at /dashboard/) and uPlot's
  // dist folder (npm uplot, served at /dashboard/uplot/); empty: not served. The build fills
  // both in.
  std::string dashboard_dir;
  std::string uplot_dir;
};

}  // namespace feed::http

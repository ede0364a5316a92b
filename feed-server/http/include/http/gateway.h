// The HTTP/JSON gateway, in the server's process: REST routes read from the protos'
// google.api.http options, run through the same operations as the gRPC handlers
// (server/operations.h); WatchStock and StreamOrderUpdates as NDJSON or server-sent
// events under the same stream rules (server/stream_support.h); /openapi.json, Swagger UI
// at /swaggerui/ and /healthz.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "http/options.h"
#include "prometheus/registry.h"
#include "server/services.h"

namespace feed::http {

class Gateway {
 public:
  // Binds options.listen and starts serving. `context` must outlive the gateway.
  static absl::StatusOr<std::unique_ptr<Gateway>> Start(const HttpOptions& options,
                                                        const server::ServiceContext& context,
                                                        prometheus::Registry& registry);
  virtual ~Gateway() = default;
  // "127.0.0.1:PORT" actually bound.
  virtual const std::string& address() const = 0;
  // Stops accepting; requests in flight get `grace` to finish (open streams are ended by
  // the shared stream registry before this is called); the rest are closed.
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace feed::http

// WatchStock and StreamOrderUpdates over HTTP/1.1, as a chunked response in one of two
// framings:
//   - NDJSON (default; grpc-gateway's framing): one `{"result":<message>}` per line, and a
//     last `{"error":<google.rpc.Status>}` line when the stream ends with an error;
//   - server-sent events (`Accept: text/event-stream`): one `data:` event per message whose
//     `id:` is its sequence (snapshot rows carry none, so a reconnect in the middle of a
//     snapshot starts a new one), and an `event: error` at an error end. A reconnect with
//     `Last-Event-ID` resumes after that sequence, under WatchStock's usual rules.
// The rules (snapshot, resume, gap, conflation, slow readers) are the core's and
// StreamSupport's, exactly as for the gRPC streams.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "http_server.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "server/services.h"

namespace feed::http {

enum class Framing { kNdjson, kServerSentEvents };

// What the access log and the metrics need once the stream has ended.
struct StreamEnd {
  int http_status;  // of the head, or of the error answered before any head
  size_t bytes;
};
using StreamDone = std::function<void(const StreamEnd&)>;

// SSE streams write a `: keep-alive` comment after `heartbeat` without other traffic (0:
// never), so that a client that went away is noticed and its slot freed.
struct StreamSettings {
  Framing framing = Framing::kNdjson;
  std::chrono::milliseconds heartbeat{0};
};

// Starts the stream: a validation error, a gap without snapshot_on_gap and a full stream
// registry are answered as plain HTTP errors before any head is sent.
void ServeStockStream(const server::ServiceContext& context, std::shared_ptr<Exchange> exchange,
                      inventory::v1::WatchStockRequest request, StreamSettings settings,
                      StreamDone done);
void ServeOrderStream(const server::ServiceContext& context, std::shared_ptr<Exchange> exchange,
                      order::v1::OrderSubscriptionRequest request, StreamSettings settings,
                      StreamDone done);

}  // namespace feed::http

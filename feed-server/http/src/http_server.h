// The HTTP/1.1 server under the gateway, on Boost.Beast: asynchronous (a few threads serve
// every connection, none is tied to one), keep-alive and pipelining (a connection's requests
// are answered in order), bounded header and body sizes, a bounded number of connections,
// idle, read and write timeouts, and a graceful shutdown. It knows nothing of routes or
// protobuf: each request goes to the handler as an Exchange.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/string_body.hpp"

namespace feed::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

struct ServerLimits {
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
  size_t max_connections = 10000;
  // Time to wait for the next request's header on an open connection (also bounds a
  // client that sends its header slowly).
  std::chrono::milliseconds idle_timeout{60000};
  // Time to receive a request's body once its header is in. A client over either timeout
  // is closed (Beast's stream closes the socket when its timer fires).
  std::chrono::milliseconds read_timeout{10000};
  // Time one response write, or one chunk of a stream, may take (a reader that stops
  // reading is closed after it).
  std::chrono::milliseconds write_timeout{30000};
};

// One chunked response in progress (NDJSON, server-sent events). Thread-safe. One Write at a
// time: the next after the previous one's `done`.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // `done(true)` once the chunk is written (on a server thread), `done(false)` when the
  // connection failed or closed.
  virtual void Write(std::string chunk, std::function<void(bool ok)> done) = 0;
  // The last chunk (may be empty) and the end of the response; the connection then reads
  // its next request, or closes when it is shutting down. `after` runs once on a server
  // thread when that is done, also when the connection had already failed.
  virtual void End(std::string last_chunk, std::function<void()> after) = 0;
  // Closes the connection now (a reader whose writes do not complete).
  virtual void Abort() = 0;
};

// How a stream keeps an idle connection checked: `heartbeat_chunk` (e.g. an SSE comment) is
// written after `heartbeat_period` without any other write, and `on_broken` runs (once, on a
// server thread) when such a write finds the client gone. Empty chunk: no heartbeat.
struct StreamOptions {
  std::string heartbeat_chunk;
  std::chrono::milliseconds heartbeat_period{0};
  std::function<void()> on_broken;
};

// One request. Respond or StartStream exactly once, from any thread.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const Request& request() const = 0;
  virtual const std::string& peer() const = 0;
  // The verified client certificate's identity (security/peer_identity.h); empty without
  // mutual TLS.
  virtual const std::string& tls_identity() const = 0;
  virtual void Respond(Response response) = 0;
  // Sends `head` (status and headers; chunked) and returns the writer of the body.
  virtual std::shared_ptr<StreamWriter> StartStream(Response head, StreamOptions options = {}) = 0;
};

struct ServerHooks {
  std::function<void(std::shared_ptr<Exchange>)> handle;
  // The JSON body of an error the server answers itself (limits, malformed requests).
  std::function<std::string(const absl::Status&)> error_body;
  // Called for each request the server answered itself: status, reason, peer.
  std::function<void(int status, std::string_view reason, std::string_view peer)> rejected;
  // Open connections changed by +1 / -1.
  std::function<void(int delta)> connections;
  // Set: every connection is TLS, with the context this returns at its accept (so a
  // reloaded certificate serves new connections). Null: plaintext.
  std::function<std::shared_ptr<boost::asio::ssl::context>()> tls_context;
  // A TLS handshake failed: peer, reason.
  std::function<void(std::string_view peer, std::string_view reason)> tls_failed;
};

class HttpServer {
 public:
  // Binds `listen` ("127.0.0.1:8081"; port 0 picks one) and starts `threads` threads.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen, int threads,
                                                           ServerLimits limits, ServerHooks hooks);
  virtual ~HttpServer() = default;
  // "127.0.0.1:PORT" actually bound.
  virtual const std::string& address() const = 0;
  // Stops accepting, lets requests in flight finish for up to `grace` (idle connections
  // close at once, busy ones after their response), then closes what is left and joins.
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace feed::http

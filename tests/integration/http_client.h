// A small blocking HTTP/1.1 client for the gateway tests, on Boost.Beast: one connection,
// requests with any headers, raw writes (pipelining, malformed input), and a reader of a
// chunked stream that returns its body as it arrives (NDJSON lines, SSE events).
#pragma once

// Boost.Beast's parser (1.74) trips GCC 12's -Wmaybe-uninitialized on a boost::optional in
// sanitizer builds, where the template is instantiated in the including test: a false
// positive in the library, silenced for the tests that use this client.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace feed::test {

namespace bhttp = boost::beast::http;
namespace net = boost::asio;

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class HttpConnection {
 public:
  explicit HttpConnection(const std::string& address, int timeout_ms = 10000) : socket_(ioc_) {
    auto colon = address.rfind(':');
    net::ip::tcp::resolver resolver(ioc_);
    net::connect(socket_, resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
    SetTimeout(timeout_ms);
  }

  void SetTimeout(int timeout_ms) {
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  // Sends one request (Content-Type application/json when there is a body).
  void Send(const std::string& method, const std::string& target, const std::string& body = "",
            const std::map<std::string, std::string>& headers = {}) {
    bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
    req.set(bhttp::field::host, "127.0.0.1");
    if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(socket_, req);
  }

  // False when the connection is already closed.
  bool SendRaw(const std::string& bytes) {
    boost::system::error_code ec;
    net::write(socket_, net::buffer(bytes), ec);
    return !ec;
  }

  // Reads one whole response; status 0 when the connection closed or timed out first.
  HttpReply Read() {
    HttpReply reply;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 << 20);
    boost::beast::error_code ec;
    bhttp::read(socket_, buffer_, parser, ec);
    if (ec) return reply;
    const auto& res = parser.get();
    reply.status = static_cast<int>(res.result_int());
    for (const auto& f : res) reply.headers[std::string(f.name_string())] = std::string(f.value());
    reply.body = res.body();
    return reply;
  }

  HttpReply Call(const std::string& method, const std::string& target, const std::string& body = "",
                 const std::map<std::string, std::string>& headers = {}) {
    Send(method, target, body, headers);
    return Read();
  }

  // Starts reading a streamed response: its status and headers.
  HttpReply ReadStreamHead() {
    stream_.emplace();
    stream_->body_limit(boost::none);
    HttpReply head;
    boost::beast::error_code ec;
    bhttp::read_header(socket_, buffer_, *stream_, ec);
    if (ec) return head;
    head.status = static_cast<int>(stream_->get().result_int());
    for (const auto& f : stream_->get())
      head.headers[std::string(f.name_string())] = std::string(f.value());
    // A response that is not streamed (an error before any update) has a plain body.
    if (!stream_->chunked()) {
      std::string body;
      while (!stream_->is_done() && ReadSome(&body)) {
      }
      head.body = body;
    }
    return head;
  }

  // Reads stream body until `until(text so far)` holds, the stream ends or `timeout` passes.
  // Returns the text read; `ended` says whether the response finished (or the socket closed).
  template <class Pred>
  std::string ReadStreamUntil(Pred until, std::chrono::milliseconds timeout, bool* ended) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    *ended = false;
    while (!until(pending_) && std::chrono::steady_clock::now() < deadline) {
      if (stream_->is_done() || !ReadSome(&pending_)) {
        *ended = true;
        break;
      }
    }
    return pending_;
  }
  void ConsumeStream(size_t n) { pending_.erase(0, n); }
  bool StreamDone() const { return stream_ && stream_->is_done(); }

  void Close() {
    boost::system::error_code ec;
    socket_.shutdown(net::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  // One read of the streamed body into `out`; false on EOF, error or the end of the body.
  bool ReadSome(std::string* out) {
    char chunk[8192];
    stream_->get().body().data = chunk;
    stream_->get().body().size = sizeof chunk;
    boost::beast::error_code ec;
    bhttp::read_some(socket_, buffer_, *stream_, ec);
    out->append(chunk, sizeof chunk - stream_->get().body().size);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec == net::error::would_block || ec == net::error::try_again) return true;  // timeout
    return !ec && !stream_->is_done();
  }

  net::io_context ioc_;
  net::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> stream_;
  std::string pending_;
};

}  // namespace feed::test

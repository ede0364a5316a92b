#include "http_server.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "boost/asio/dispatch.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "fmt/format.h"
#include "security/peer_identity.h"

namespace feed::http {

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class ServerImpl;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// What the server and an exchange see of a connection, plaintext or TLS.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void Start(bool reject) = 0;
  // From the server's shutdown: idle connections close now, busy ones after their response.
  virtual void Drain() = 0;
  virtual void Close() = 0;

  // Exchange and stream support; each posts to the strand.
  virtual void Respond(Response response) = 0;
  virtual void StartStream(Response head, StreamOptions options) = 0;
  virtual void WriteChunk(std::string chunk, std::function<void(bool)> done) = 0;
  virtual void EndStream(std::string last_chunk, std::function<void()> after) = 0;

  const Request& request() const { return request_; }
  const std::string& peer() const { return peer_; }
  const std::string& tls_identity() const { return tls_identity_; }

 protected:
  std::string peer_;
  std::string tls_identity_;
  Request request_;
};

// One connection: (for TLS, the handshake first) reads a request, hands it to the handler,
// writes its response (or its stream), then reads the next one. Everything runs on the
// connection's strand.
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // `tls`: the TLS context of the moment (kept alive by the connection); null for plaintext.
  Session(tcp::socket socket, ServerImpl* server, std::shared_ptr<net::ssl::context> tls);
  ~Session() override;

  void Start(bool reject) override;
  void Drain() override;
  void Close() override;
  void Respond(Response response) override;
  void StartStream(Response head, StreamOptions options) override;
  void WriteChunk(std::string chunk, std::function<void(bool)> done) override;
  void EndStream(std::string last_chunk, std::function<void()> after) override;

 private:
  auto& lowest() { return beast::get_lowest_layer(stream_); }
  void Handshake();
  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void OnRequest(beast::error_code ec);
  void RejectRead(beast::error_code ec);
  void SendError(bhttp::status status, const absl::Status& why);
  void WriteResponse(std::shared_ptr<Response> response);
  void AfterResponse(bool ok);
  // A stream's writes, one at a time in order: the head, chunks, heartbeats, the end.
  struct StreamOut {
    enum class Kind { kChunk, kHeartbeat, kLast } kind;
    std::shared_ptr<std::string> data;
    std::function<void(bool ok)> done;  // null for heartbeats
  };
  void FlushStream();
  void OnStreamWritten(StreamOut item, beast::error_code ec);
  void ArmHeartbeat();
  // On the strand.
  void CloseNow();

  std::shared_ptr<net::ssl::context> tls_;  // before stream_, which refers to it
  Stream stream_;
  ServerImpl* server_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool busy_ = false;      // a request is being answered
  bool draining_ = false;  // close after the response in flight
  bool closed_ = false;
  bool keep_alive_ = true;
  // The stream in progress: its header serializer, the writes waiting, the heartbeat.
  std::shared_ptr<bhttp::response<bhttp::empty_body>> stream_head_;
  std::shared_ptr<bhttp::response_serializer<bhttp::empty_body>> stream_serializer_;
  std::deque<StreamOut> stream_out_;
  bool stream_writing_ = false;
  StreamOptions stream_options_;
  net::steady_timer heartbeat_;
};

class ExchangeImpl final : public Exchange,
                           public StreamWriter,
                           public std::enable_shared_from_this<ExchangeImpl> {
 public:
  explicit ExchangeImpl(std::shared_ptr<SessionBase> session) : session_(std::move(session)) {}

  const Request& request() const override { return session_->request(); }
  const std::string& peer() const override { return session_->peer(); }
  const std::string& tls_identity() const override { return session_->tls_identity(); }
  void Respond(Response response) override {
    if (answered_.exchange(true)) return;
    session_->Respond(std::move(response));
  }
  std::shared_ptr<StreamWriter> StartStream(Response head, StreamOptions options) override;
  void Write(std::string chunk, std::function<void(bool)> done) override {
    session_->WriteChunk(std::move(chunk), std::move(done));
  }
  void End(std::string last_chunk, std::function<void()> after) override {
    if (ended_.exchange(true)) return;
    session_->EndStream(std::move(last_chunk), std::move(after));
  }
  void Abort() override { session_->Close(); }

 private:
  std::shared_ptr<SessionBase> session_;
  std::atomic<bool> answered_{false};
  std::atomic<bool> ended_{false};
};

class ServerImpl final : public HttpServer {
 public:
  ServerImpl(int threads, ServerLimits limits, ServerHooks hooks)
      : limits_(limits),
        hooks_(std::move(hooks)),
        ioc_(threads),
        acceptor_(net::make_strand(ioc_)),
        threads_(threads) {}
  ~ServerImpl() override { Shutdown(std::chrono::milliseconds(0)); }

  absl::Status Listen(const std::string& listen);
  const std::string& address() const override { return address_; }
  void Shutdown(std::chrono::milliseconds grace) override;

  const ServerLimits& limits() const { return limits_; }
  const ServerHooks& hooks() const { return hooks_; }
  void Added(SessionBase* s, const std::shared_ptr<SessionBase>& session) {
    std::lock_guard lock(mu_);
    sessions_[s] = session;
  }
  void Removed(SessionBase* s) {
    std::lock_guard lock(mu_);
    sessions_.erase(s);
    cv_.notify_all();
  }

 private:
  void Accept();

  const ServerLimits limits_;
  const ServerHooks hooks_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  int threads_;
  std::vector<std::thread> workers_;
  std::string address_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions_;
  bool shut_down_ = false;
};

// --- Session ---------------------------------------------------------------------------

template <class Stream>
Stream MakeStream(tcp::socket socket, net::ssl::context* tls) {
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    return Stream(std::move(socket), *tls);
  } else {
    return Stream(std::move(socket));
  }
}

template <class Stream>
Session<Stream>::Session(tcp::socket socket, ServerImpl* server,
                         std::shared_ptr<net::ssl::context> tls)
    : tls_(std::move(tls)),
      stream_(MakeStream<Stream>(std::move(socket), tls_.get())),
      server_(server),
      heartbeat_(stream_.get_executor()) {
  beast::error_code ec;
  auto endpoint = lowest().socket().remote_endpoint(ec);
  peer_ = ec ? "unknown" : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  if (server_->hooks().connections) server_->hooks().connections(+1);
}

template <class Stream>
Session<Stream>::~Session() {
  if (server_->hooks().connections) server_->hooks().connections(-1);
  server_->Removed(this);
}

template <class Stream>
void Session<Stream>::Start(bool reject) {
  server_->Added(this, this->shared_from_this());
  net::dispatch(stream_.get_executor(), [self = this->shared_from_this(), reject] {
    if (reject) {
      self->keep_alive_ = false;
      self->busy_ = true;
      self->SendError(bhttp::status::service_unavailable,
                      absl::UnavailableError(
                          fmt::format("too many connections (limit {}, --http-max-connections)",
                                      self->server_->limits().max_connections)));
      return;
    }
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      self->Handshake();
    } else {
      self->ReadHeader();
    }
  });
}

// A client that does not finish the handshake within the read timeout is closed; so is one
// whose certificate the context refuses (mTLS).
template <class Stream>
void Session<Stream>::Handshake() {
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    lowest().expires_after(server_->limits().read_timeout);
    stream_.async_handshake(
        net::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
          if (ec) {
            if (self->server_->hooks().tls_failed) {
              self->server_->hooks().tls_failed(self->peer_, ec.message());
            }
            return self->CloseNow();
          }
          X509* cert = SSL_get1_peer_certificate(self->stream_.native_handle());
          if (cert != nullptr) {
            self->tls_identity_ = security::PeerIdentity(security::NamesOfCertificate(cert));
            X509_free(cert);
          }
          self->ReadHeader();
        });
  }
}

template <class Stream>
void Session<Stream>::Drain() {
  net::post(stream_.get_executor(), [self = this->shared_from_this()] {
    self->draining_ = true;
    if (!self->busy_) self->Close();
  });
}

template <class Stream>
void Session<Stream>::Close() {
  net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->CloseNow(); });
}

template <class Stream>
void Session<Stream>::CloseNow() {
  if (closed_) return;
  closed_ = true;
  heartbeat_.cancel();
  beast::error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
  lowest().close();
}

template <class Stream>
void Session<Stream>::ReadHeader() {
  if (draining_ || closed_) return Close();
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_->limits().max_header_bytes));
  parser_->body_limit(server_->limits().max_body_bytes);
  lowest().expires_after(server_->limits().idle_timeout);
  bhttp::async_read_header(
      stream_, buffer_, *parser_,
      [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

template <class Stream>
void Session<Stream>::OnHeader(beast::error_code ec) {
  if (ec) return RejectRead(ec);
  lowest().expires_after(server_->limits().read_timeout);
  bhttp::async_read(
      stream_, buffer_, *parser_,
      [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRequest(ec); });
}

template <class Stream>
void Session<Stream>::OnRequest(beast::error_code ec) {
  if (ec) return RejectRead(ec);
  lowest().expires_never();
  request_ = parser_->release();
  keep_alive_ = request_.keep_alive();
  busy_ = true;
  server_->hooks().handle(std::make_shared<ExchangeImpl>(this->shared_from_this()));
}

// A request that could not be read: answered when there is something to say, else closed.
template <class Stream>
void Session<Stream>::RejectRead(beast::error_code ec) {
  keep_alive_ = false;
  busy_ = true;
  if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted || closed_) {
    return Close();
  }
  // Beast's stream has already closed the socket when its timer fired: a client that sends
  // nothing, or its request too slowly, is closed without an answer.
  if (ec == beast::error::timeout) return Close();
  if (ec == bhttp::error::header_limit) {
    return SendError(bhttp::status::request_header_fields_too_large,
                     absl::ResourceExhaustedError(fmt::format(
                         "request header larger than {} bytes (--http-max-header-bytes)",
                         server_->limits().max_header_bytes)));
  }
  if (ec == bhttp::error::body_limit) {
    return SendError(bhttp::status::payload_too_large,
                     absl::ResourceExhaustedError(
                         fmt::format("request body larger than {} bytes (--http-max-body-bytes)",
                                     server_->limits().max_body_bytes)));
  }
  SendError(bhttp::status::bad_request,
            absl::InvalidArgumentError(fmt::format("malformed HTTP request: {}", ec.message())));
}

template <class Stream>
void Session<Stream>::SendError(bhttp::status status, const absl::Status& why) {
  if (server_->hooks().rejected) {
    server_->hooks().rejected(static_cast<int>(status),
                              std::string_view(why.message().data(), why.message().size()), peer_);
  }
  auto response = std::make_shared<Response>(status, 11);
  response->set(bhttp::field::content_type, "application/json");
  response->body() = server_->hooks().error_body(why);
  WriteResponse(std::move(response));
}

template <class Stream>
void Session<Stream>::Respond(Response response) {
  net::post(stream_.get_executor(),
            [self = this->shared_from_this(), r = std::make_shared<Response>(std::move(response))] {
              self->WriteResponse(r);
            });
}

template <class Stream>
void Session<Stream>::WriteResponse(std::shared_ptr<Response> response) {
  if (closed_) return;
  response->keep_alive(keep_alive_ && !draining_);
  response->prepare_payload();
  lowest().expires_after(server_->limits().write_timeout);
  bhttp::async_write(stream_, *response,
                     [self = this->shared_from_this(), response](beast::error_code ec, size_t) {
                       self->AfterResponse(!ec);
                     });
}

template <class Stream>
void Session<Stream>::AfterResponse(bool ok) {
  busy_ = false;
  if (!ok || !keep_alive_ || draining_) return Close();
  ReadHeader();
}

template <class Stream>
void Session<Stream>::StartStream(Response head, StreamOptions options) {
  net::post(stream_.get_executor(), [self = this->shared_from_this(),
                                     h = std::make_shared<Response>(std::move(head)),
                                     options = std::move(options)]() mutable {
    if (self->closed_) return;
    self->stream_options_ = std::move(options);
    self->stream_head_ = std::make_shared<bhttp::response<bhttp::empty_body>>(h->result(), 11);
    for (const auto& field : *h) self->stream_head_->set(field.name_string(), field.value());
    self->stream_head_->keep_alive(self->keep_alive_ && !self->draining_);
    self->stream_head_->chunked(true);
    self->stream_serializer_ =
        std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*self->stream_head_);
    self->lowest().expires_after(self->server_->limits().write_timeout);
    self->stream_writing_ = true;
    bhttp::async_write_header(
        self->stream_, *self->stream_serializer_, [self](beast::error_code ec, size_t) {
          self->OnStreamWritten({StreamOut::Kind::kHeartbeat, nullptr, {}}, ec);
        });
  });
}

template <class Stream>
void Session<Stream>::WriteChunk(std::string chunk, std::function<void(bool)> done) {
  net::post(stream_.get_executor(), [self = this->shared_from_this(),
                                     data = std::make_shared<std::string>(std::move(chunk)),
                                     done = std::move(done)]() mutable {
    if (self->closed_) return done(false);
    self->stream_out_.push_back({StreamOut::Kind::kChunk, data, std::move(done)});
    self->FlushStream();
  });
}

template <class Stream>
void Session<Stream>::EndStream(std::string last_chunk, std::function<void()> after) {
  net::post(stream_.get_executor(), [self = this->shared_from_this(),
                                     data = std::make_shared<std::string>(std::move(last_chunk)),
                                     after = std::move(after)]() mutable {
    if (self->closed_) return after();
    self->stream_out_.push_back(
        {StreamOut::Kind::kLast, data, [after = std::move(after)](bool) { after(); }});
    self->FlushStream();
  });
}

// Starts the next stream write unless one is in flight.
template <class Stream>
void Session<Stream>::FlushStream() {
  if (stream_writing_ || stream_out_.empty()) return;
  if (closed_) {
    auto pending = std::move(stream_out_);
    stream_out_.clear();
    for (auto& item : pending) {
      if (item.done) item.done(false);
    }
    return;
  }
  StreamOut item = std::move(stream_out_.front());
  stream_out_.pop_front();
  stream_writing_ = true;
  lowest().expires_after(server_->limits().write_timeout);
  auto data = item.data;
  const auto kind = item.kind;
  auto written = [self = this->shared_from_this(), item = std::move(item)](beast::error_code ec,
                                                                           size_t) mutable {
    self->OnStreamWritten(std::move(item), ec);
  };
  if (kind != StreamOut::Kind::kLast) {
    net::async_write(stream_, bhttp::make_chunk(net::buffer(*data)), std::move(written));
  } else if (data->empty()) {
    net::async_write(stream_, bhttp::make_chunk_last(), std::move(written));
  } else {
    net::async_write(stream_, bhttp::make_chunk(net::buffer(*data)),
                     [self = this->shared_from_this(), data, written = std::move(written)](
                         beast::error_code ec, size_t n) mutable {
                       if (ec) return written(ec, n);
                       net::async_write(self->stream_, bhttp::make_chunk_last(),
                                        std::move(written));
                     });
  }
}

template <class Stream>
void Session<Stream>::OnStreamWritten(StreamOut item, beast::error_code ec) {
  stream_writing_ = false;
  if (item.kind == StreamOut::Kind::kLast) {
    heartbeat_.cancel();
    stream_serializer_.reset();
    stream_head_.reset();
    stream_options_ = {};
    AfterResponse(!ec);
    item.done(!ec);
    FlushStream();  // fails anything left (nothing should be)
    return;
  }
  if (ec) {
    CloseNow();
    if (item.done) {
      item.done(false);
    } else if (stream_options_.on_broken) {
      // A heartbeat (or the head) found the client gone: the stream learns it now.
      auto broken = std::move(stream_options_.on_broken);
      stream_options_.on_broken = nullptr;
      broken();
    }
    FlushStream();
    return;
  }
  if (item.done) item.done(true);
  ArmHeartbeat();
  FlushStream();
}

// After each write the next heartbeat is due one period later; it is written only if the
// stream has had nothing else to send meanwhile.
template <class Stream>
void Session<Stream>::ArmHeartbeat() {
  if (stream_options_.heartbeat_chunk.empty() || stream_options_.heartbeat_period.count() <= 0 ||
      !stream_serializer_ || closed_) {
    return;
  }
  heartbeat_.expires_after(stream_options_.heartbeat_period);
  heartbeat_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_ || !self->stream_serializer_) return;
    if (self->stream_writing_ || !self->stream_out_.empty()) return;  // traffic re-arms it
    self->stream_out_.push_back(
        {StreamOut::Kind::kHeartbeat,
         std::make_shared<std::string>(self->stream_options_.heartbeat_chunk),
         {}});
    self->FlushStream();
  });
}

std::shared_ptr<StreamWriter> ExchangeImpl::StartStream(Response head, StreamOptions options) {
  if (answered_.exchange(true)) return nullptr;
  session_->StartStream(std::move(head), std::move(options));
  return std::static_pointer_cast<StreamWriter>(shared_from_this());
}

// --- ServerImpl ------------------------------------------------------------------------

absl::Status ServerImpl::Listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("--http-listen: expected HOST:PORT, got '{}'", listen));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("--http-listen: '{}' is not an IP address", host));
  }
  unsigned port = 0;
  try {
    port = static_cast<unsigned>(std::stoul(listen.substr(colon + 1)));
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(fmt::format("--http-listen: bad port in '{}'", listen));
  }
  if (port > 65535)
    return absl::InvalidArgumentError(fmt::format("--http-listen: bad port in '{}'", listen));
  tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(fmt::format("cannot listen on {}: {}", listen, ec.message()));
  }
  auto bound = acceptor_.local_endpoint();
  address_ = fmt::format("{}:{}", host, bound.port());
  Accept();
  for (int i = 0; i < threads_; ++i) {
    workers_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "feed-http");
      ioc_.run();
    });
  }
  return absl::OkStatus();
}

void ServerImpl::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      Accept();
      return;
    }
    size_t open = 0;
    {
      std::lock_guard lock(mu_);
      open = sessions_.size();
    }
    const bool reject = open >= limits_.max_connections;
    if (hooks_.tls_context) {
      std::make_shared<Session<TlsStream>>(std::move(socket), this, hooks_.tls_context())
          ->Start(reject);
    } else {
      std::make_shared<Session<PlainStream>>(std::move(socket), this, nullptr)->Start(reject);
    }
    Accept();
  });
}

void ServerImpl::Shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
  auto each = [this](auto fn) {
    std::vector<std::shared_ptr<SessionBase>> live;
    {
      std::lock_guard lock(mu_);
      for (auto& [ptr, weak] : sessions_) {
        if (auto s = weak.lock()) live.push_back(std::move(s));
      }
    }
    for (auto& s : live) fn(*s);
  };
  each([](SessionBase& s) { s.Drain(); });
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, grace, [this] { return sessions_.empty(); });
  }
  each([](SessionBase& s) { s.Close(); });
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(2), [this] { return sessions_.empty(); });
  }
  ioc_.stop();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              int threads, ServerLimits limits,
                                                              ServerHooks hooks) {
  auto server = std::make_unique<ServerImpl>(threads, limits, std::move(hooks));
  if (absl::Status s = server->Listen(listen); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace feed::http

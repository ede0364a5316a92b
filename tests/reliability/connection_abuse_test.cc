// Connection abuse against the real feed-server binary, with the server's open file
// descriptors and resident memory read from /proc after each wave:
//
//   - silent sockets: TCP connections that never send the HTTP/2 preface (slowloris) are
//     closed after --handshake-timeout-ms;
//   - idle clients: gRPC channels that made one call and went quiet are closed after
//     --max-connection-idle-ms, and can reconnect afterwards;
//   - half-open peers: connections that finished the handshake but never answer the
//     server's keepalive pings are closed after --keepalive-time-ms + --keepalive-timeout-ms;
//   - ping floods: a peer sending PING frames back to back gets GOAWAY ENHANCE_YOUR_CALM;
//   - streams over the limit: beyond --max-open-streams, new streams get RESOURCE_EXHAUSTED,
//     and the slots come back when the streams end.
//
// Each wave runs twice: the second round must not leave more fds or memory behind than the
// first (a leak grows with every round). ABUSE_CONNECTIONS sets the wave size (default 2000).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "reliability/server_process.h"

namespace feed {
namespace {

namespace inv = inventory::v1;
using Clock = std::chrono::steady_clock;

constexpr int kHandshakeTimeoutMs = 2000;
constexpr int kIdleMs = 3000;
// The server's floor (config.cc): with a shorter period gRPC 1.51 can fire a new
// connection's first keepalive ping while the connection is still being set up, and abort.
constexpr int kKeepaliveMs = 10000;
constexpr int kKeepaliveTimeoutMs = 1000;
// For the keepalive test: longer than keepalive time + timeout, so keepalive closes first.
constexpr int kLongIdleMs = 15000;
constexpr int kMaxOpenStreams = 64;

int WaveSize() {
  const char* env = std::getenv("ABUSE_CONNECTIONS");
  return env ? std::atoi(env) : 2000;
}

// A plain TCP connection to the server; -1 on failure.
int ConnectTcp(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// HTTP/2 frame: 3-byte length, type, flags, 4-byte stream id (0 here), payload.
std::string Frame(uint8_t type, uint8_t flags, const std::string& payload) {
  std::string f;
  const size_t n = payload.size();
  f.push_back(static_cast<char>((n >> 16) & 0xff));
  f.push_back(static_cast<char>((n >> 8) & 0xff));
  f.push_back(static_cast<char>(n & 0xff));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  f.append(4, '\0');
  return f + payload;
}
constexpr uint8_t kSettings = 0x4, kPing = 0x6, kGoAway = 0x7;
constexpr uint32_t kEnhanceYourCalm = 0xb;

// The client side of the HTTP/2 handshake: preface, empty SETTINGS, ACK of the server's.
bool SendHandshake(int fd) {
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  out += Frame(kSettings, 0, "");
  out += Frame(kSettings, 0x1, "");
  return send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
}

// True once the server has closed `fd` (EOF or reset); reads and discards what it sent.
bool ClosedByServer(int fd) {
  char buf[4096];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

// Waits until every socket in `fds` is closed by the server or `limit` passes; the number
// still open.
int WaitAllClosed(const std::vector<int>& fds, std::chrono::milliseconds limit) {
  std::vector<bool> closed(fds.size(), false);
  int open = static_cast<int>(fds.size());
  const auto deadline = Clock::now() + limit;
  while (open > 0 && Clock::now() < deadline) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!closed[i] && ClosedByServer(fds[i])) {
        closed[i] = true;
        --open;
      }
    }
    if (open > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return open;
}

// Waits until the server's fd count is at most `target` or `limit` passes; the last count.
int WaitFds(const testing::ServerProcess& server, int target, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  int fds = server.OpenFds();
  while (fds > target && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds = server.OpenFds();
  }
  return fds;
}

bool Healthy(const std::string& address) {
  auto stub = inv::InventoryService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  inv::GetStockRequest req;
  req.add_keys()->set_sku("health");
  inv::GetStockResponse resp;
  return stub->GetStock(&ctx, req, &resp).ok();
}

void Report(const char* wave, int round, int peak_fds, int after_fds, long rss_kb) {
  std::printf("[ abuse    ] %-16s round %d: server fds peak %d, after %d; RSS %ld MB\n", wave,
              round, peak_fds, after_fds, rss_kb / 1024);
  std::fflush(stdout);
}

class ConnectionAbuse : public ::testing::Test {
 protected:
  virtual int IdleMs() const { return kIdleMs; }

 protected:
  static void SetUpTestSuite() {
    // The waves need a few thousand sockets on each side (the server inherits this limit).
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }

  void SetUp() override {
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_cur < static_cast<rlim_t>(2 * WaveSize() + 200)) {
      GTEST_SKIP() << "RLIMIT_NOFILE " << lim.rlim_cur << " is too low for waves of " << WaveSize()
                   << " (set ABUSE_CONNECTIONS lower)";
    }
    server_ = std::make_unique<testing::ServerProcess>(
        FEED_SERVER_PATH,
        std::vector<std::string>{
            "--durability", "async", "--handshake-timeout-ms", std::to_string(kHandshakeTimeoutMs),
            "--max-connection-idle-ms", std::to_string(IdleMs()), "--keepalive-time-ms",
            std::to_string(kKeepaliveMs), "--keepalive-timeout-ms",
            std::to_string(kKeepaliveTimeoutMs), "--keepalive-min-ping-interval-ms", "5000",
            "--max-open-streams", std::to_string(kMaxOpenStreams)});
    ASSERT_TRUE(server_->started());
    auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(
        channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
    ASSERT_TRUE(Healthy(server_->address()));
    // Settle: the probe channels above are closed when idle; count from there.
    std::this_thread::sleep_for(std::chrono::milliseconds(IdleMs() + 1000));
    baseline_fds_ = server_->OpenFds();
    baseline_kb_ = server_->RssKb();
    std::printf("[ abuse    ] baseline: server fds %d, RSS %ld MB\n", baseline_fds_,
                baseline_kb_ / 1024);
  }

  void TearDown() override {
    if (!server_ || !server_->started()) return;
    EXPECT_TRUE(Healthy(server_->address())) << "the server stopped answering";
    const int status = server_->Stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit status " << status;
  }

  // After a wave: the server's fds are back to the baseline (a few of gRPC's own may come and
  // go), and the memory of this round is no more than the first round's + `slack_kb`.
  void ExpectReclaimed(const char* wave, int round, int peak_fds, long* first_round_kb) {
    const int after =
        WaitFds(*server_, baseline_fds_ + 4, std::chrono::seconds(10 * testing::kSlowdown));
    long rss = server_->RssKb();
    // The server returns free memory to the OS once a second (--max-free-heap-mb): a round
    // that ended a moment ago may still hold some; give it up to 3 s before comparing.
    for (int i = 0; i < 30 && round > 1 && rss > *first_round_kb + 16 * 1024; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      rss = server_->RssKb();
    }
    Report(wave, round, peak_fds, after, rss);
    EXPECT_LE(after, baseline_fds_ + 4) << wave << ": file descriptors left open";
    if (!testing::kCheckFigures) return;
    if (round == 1) {
      *first_round_kb = rss;
    } else {
      EXPECT_LE(rss, *first_round_kb + 16 * 1024) << wave << ": memory grows round after round";
    }
    EXPECT_LE(rss, baseline_kb_ + 128 * 1024) << wave << ": memory far above the baseline";
  }

  std::unique_ptr<testing::ServerProcess> server_;
  int baseline_fds_ = 0;
  long baseline_kb_ = 0;
};

TEST_F(ConnectionAbuse, SilentSocketsAreClosedAfterTheHandshakeTimeout) {
  long first_kb = 0;
  for (int round = 1; round <= 2; ++round) {
    // No connection of the wave is accepted before this, so none may be closed before this
    // + the handshake timeout.
    const auto wave_started = Clock::now();
    std::vector<int> fds;
    for (int i = 0; i < WaveSize(); ++i) {
      int fd = ConnectTcp(server_->port());
      ASSERT_GE(fd, 0) << "connect " << i << ": " << std::strerror(errno);
      fds.push_back(fd);
    }
    // ... all accepted (the server holds one fd each; a few of gRPC's own come and go), and
    // none closed before the handshake timeout: checked until just before it can have passed
    // for the first of them.
    const auto last_check = wave_started + std::chrono::milliseconds(kHandshakeTimeoutMs * 9 / 10);
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    int peak = server_->OpenFds();
    int early = 0;
    bool checked = false;
    while (true) {
      peak = std::max(peak, server_->OpenFds());
      const bool in_window = Clock::now() < last_check;
      if (in_window) {
        early = 0;
        for (int fd : fds) early += ClosedByServer(fd) ? 1 : 0;
        checked = true;
        if (early > 0) break;
      } else if (peak >= baseline_fds_ + WaveSize() - 4 || Clock::now() >= give_up) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_GE(peak, baseline_fds_ + WaveSize() * 9 / 10) << "the server did not accept them";
    if (checked) {
      EXPECT_EQ(early, 0) << "closed before the handshake timeout";
    } else if (testing::kCheckFigures) {
      ADD_FAILURE() << "connecting the wave took longer than the handshake timeout";
    } else {
      // A sanitizer build can be that slow: the early-close check has no window left.
      std::printf(
          "[ abuse    ] silent sockets   round %d: connected too slowly to check for "
          "early closes\n",
          round);
    }
    // ... and every one closed by the server after it.
    EXPECT_EQ(WaitAllClosed(
                  fds, std::chrono::milliseconds(kHandshakeTimeoutMs + 8000 * testing::kSlowdown)),
              0);
    for (int fd : fds) close(fd);
    ExpectReclaimed("silent sockets", round, peak, &first_kb);
  }
}

TEST_F(ConnectionAbuse, IdleClientsAreClosedAndCanReconnect) {
  const int n = WaveSize() / 2;  // gRPC channels cost the test far more than raw sockets
  long first_kb = 0;
  for (int round = 1; round <= 2; ++round) {
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    for (int i = 0; i < n; ++i) {
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", round * 100000 + i);  // a connection each
      channels.push_back(
          grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
    }
    int ok = 0;
    for (auto& ch : channels) {
      auto stub = inv::InventoryService::NewStub(ch);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      inv::GetStockRequest req;
      req.add_keys()->set_sku("idle");
      inv::GetStockResponse resp;
      ok += stub->GetStock(&ctx, req, &resp).ok() ? 1 : 0;
    }
    EXPECT_EQ(ok, n);
    const int peak = server_->OpenFds();
    // (Under a sanitizer the first connections may reach their idle time before the last
    // call: the peak is then lower.)
    if (testing::kCheckFigures) {
      EXPECT_GE(peak, baseline_fds_ + n * 9 / 10);
    }
    // The server closes them after the idle time (its fds drop back to the baseline).
    std::this_thread::sleep_for(std::chrono::milliseconds(kIdleMs + 1000));
    ExpectReclaimed("idle clients", round, peak, &first_kb);
    // A closed idle connection is not a broken client: the next call reconnects. The
    // client may not have read the GOAWAY yet (nothing polls an idle channel), so its first
    // attempt can fail UNAVAILABLE; one retry, as every gRPC client policy does, succeeds.
    grpc::Status st;
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto stub = inv::InventoryService::NewStub(channels.front());
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      inv::GetStockRequest req;
      req.add_keys()->set_sku("idle");
      inv::GetStockResponse resp;
      st = stub->GetStock(&ctx, req, &resp);
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    }
    EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  }
}

class ConnectionAbuseLongIdle : public ConnectionAbuse {
 protected:
  int IdleMs() const override { return kLongIdleMs; }
};

TEST_F(ConnectionAbuseLongIdle, HalfOpenPeersAreClosedByKeepalive) {
  // Handshake done, then silence: never an ACK of the server's pings, never a frame read.
  // The idle timeout would close them too; keepalive must do it first.
  const int n = WaveSize() / 4;
  long first_kb = 0;
  for (int round = 1; round <= 2; ++round) {
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) {
      int fd = ConnectTcp(server_->port());
      ASSERT_GE(fd, 0);
      ASSERT_TRUE(SendHandshake(fd));
      fds.push_back(fd);
    }
    const auto started = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const int peak = server_->OpenFds();
    EXPECT_GE(peak, baseline_fds_ + n * 9 / 10);
    EXPECT_EQ(
        WaitAllClosed(fds, std::chrono::milliseconds(kLongIdleMs + 8000 * testing::kSlowdown)), 0);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    std::printf("[ abuse    ] half-open peers closed after %lld ms\n",
                static_cast<long long>(took));
    if (testing::kCheckFigures) {
      EXPECT_LT(took, kLongIdleMs) << "closed by the idle timeout, not by keepalive";
    }
    for (int fd : fds) close(fd);
    ExpectReclaimed("half-open peers", round, peak, &first_kb);
  }
}

TEST_F(ConnectionAbuse, PingFloodsGetGoAwayEnhanceYourCalm) {
  long first_kb = 0;
  for (int round = 1; round <= 2; ++round) {
    constexpr int kFlooders = 20;
    int calmed = 0;
    for (int i = 0; i < kFlooders; ++i) {
      int fd = ConnectTcp(server_->port());
      ASSERT_GE(fd, 0);
      ASSERT_TRUE(SendHandshake(fd));
      // Up to 10,000 pings as fast as the socket takes them, reading what comes back; stop
      // at the server's GOAWAY or close.
      std::string in;
      bool goaway = false, closed = false;
      const std::string ping = Frame(kPing, 0, std::string(8, 'p'));
      // Reads what the server sent and parses whole frames from the start of `in` (its
      // SETTINGS, ACKs, GOAWAY).
      auto read_frames = [&] {
        char buf[4096];
        ssize_t got;
        while ((got = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) in.append(buf, got);
        if (got == 0) closed = true;
        size_t pos = 0;
        while (in.size() - pos >= 9) {
          const auto* h = reinterpret_cast<const unsigned char*>(in.data() + pos);
          const size_t len = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
          if (in.size() - pos < 9 + len) break;
          if (h[3] == kGoAway && len >= 8) {
            const auto* pl = h + 9;
            const uint32_t code =
                (uint32_t{pl[4]} << 24) | (uint32_t{pl[5]} << 16) | (uint32_t{pl[6]} << 8) | pl[7];
            goaway = code == kEnhanceYourCalm;
          }
          pos += 9 + len;
        }
        in.erase(0, pos);
      };
      for (int p = 0; p < 10000 && !goaway && !closed; ++p) {
        if (send(fd, ping.data(), ping.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
            errno != EAGAIN) {
          closed = true;
        }
        read_frames();
        if (p % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      // The flood can be all sent before the server has read two of its pings: its verdict
      // (the GOAWAY) may still be on the way.
      for (auto until = Clock::now() + std::chrono::seconds(5);
           !goaway && !closed && Clock::now() < until;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        read_frames();
      }
      calmed += goaway ? 1 : 0;
      // After the GOAWAY the server closes the connection.
      EXPECT_EQ(WaitAllClosed({fd}, std::chrono::seconds(5 * testing::kSlowdown)), 0);
      close(fd);
    }
    // (Under a sanitizer a flooder may send its 10,000 pings before the server has judged
    // two of them: the server must still survive and clean up, checked below.)
    if (testing::kCheckFigures) {
      EXPECT_EQ(calmed, kFlooders) << "flooders without GOAWAY ENHANCE_YOUR_CALM";
    }
    EXPECT_TRUE(Healthy(server_->address()));
    ExpectReclaimed("ping floods", round, baseline_fds_ + 1, &first_kb);
  }
}

struct WatchStream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<inv::StockUpdate>> reader;
};

// Cancels every stream, reads each to its end, and drops them.
void CancelAll(std::vector<std::unique_ptr<WatchStream>>& streams) {
  for (auto& s : streams) s->ctx.TryCancel();
  for (auto& s : streams) {
    inv::StockUpdate u;
    while (s->reader->Read(&u)) {
    }
    s->reader->Finish();
  }
  streams.clear();
}

TEST_F(ConnectionAbuse, StreamsOverTheLimitAreRefusedAndSlotsComeBack) {
  using Stream = WatchStream;
  long first_kb = 0;
  for (int round = 1; round <= 2; ++round) {
    // kMaxOpenStreams + 16 WatchStock streams over 8 connections.
    std::vector<std::unique_ptr<inv::InventoryService::Stub>> stubs;
    for (int c = 0; c < 8; ++c) {
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", round * 1000 + c);
      stubs.push_back(inv::InventoryService::NewStub(
          grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args)));
    }
    std::vector<std::unique_ptr<Stream>> streams;
    int accepted = 0, refused = 0, other = 0;
    for (int i = 0; i < kMaxOpenStreams + 16; ++i) {
      auto s = std::make_unique<Stream>();
      s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      inv::WatchStockRequest req;
      req.add_keys()->set_sku("limit-" + std::to_string(i));
      s->reader = stubs[i % stubs.size()]->WatchStock(&s->ctx, req);
      inv::StockUpdate u;
      // An accepted stream starts with its snapshot (here just SNAPSHOT_END).
      if (s->reader->Read(&u)) {
        ++accepted;
        streams.push_back(std::move(s));
      } else {
        grpc::Status st = s->reader->Finish();
        (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? refused : other)++;
      }
    }
    EXPECT_EQ(accepted, kMaxOpenStreams);
    EXPECT_EQ(refused, 16);
    EXPECT_EQ(other, 0);
    const int peak = server_->OpenFds();
    CancelAll(streams);
    stubs.clear();
    // The slots are free again: a full set opens.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto stub = inv::InventoryService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    for (int i = 0; i < kMaxOpenStreams; ++i) {
      auto s = std::make_unique<Stream>();
      s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      s->reader = stub->WatchStock(&s->ctx, inv::WatchStockRequest());
      inv::StockUpdate u;
      EXPECT_TRUE(s->reader->Read(&u)) << "stream " << i << " refused after the others ended";
      streams.push_back(std::move(s));
    }
    CancelAll(streams);
    stub.reset();
    ExpectReclaimed("streams over limit", round, peak, &first_kb);
  }
}

}  // namespace
}  // namespace feed

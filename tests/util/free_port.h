// A loopback port nobody holds right now, chosen by the kernel. A fixed or random range can
// collide with another test's listener or with a client connection's ephemeral port (Linux
// hands those out from 32768 up), and a server that cannot bind its port exits at start. The
// kernel may offer the same free port to two calls in a row, so the ports given to this
// process are remembered and never given twice.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <set>
#include <vector>

namespace feed::test_util {

inline int FreeLoopbackPort() {
  static std::mutex mutex;
  static std::set<int> given;
  const std::lock_guard<std::mutex> lock(mutex);
  std::vector<int> held;  // bound until one is chosen, so the kernel cannot offer it again
  int port = 0;
  for (int attempt = 0; attempt < 64 && port == 0; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    held.push_back(fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      break;
    if (given.insert(ntohs(address.sin_port)).second) port = ntohs(address.sin_port);
  }
  for (const int fd : held) close(fd);
  return port;
}

}  // namespace feed::test_util

//===- Rendezvous.cpp - rank 0's bytes to every rank over TCP -------------===//

#include "Rendezvous.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ampc {
namespace {

constexpr char kMagic[8] = {'A', 'M', 'P', 'C', 'R', 'D', 'V', '1'};
using Clock = std::chrono::steady_clock;

/// A socket closed when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int fd = -1) : fd(fd) {}
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;
  ~Socket() {
    if (fd >= 0)
      ::close(fd);
  }
};

int remainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left < 0 ? 0 : static_cast<int>(left);
}

/// Waits for `events` on `fd` until the deadline; false on timeout.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ready = ::poll(&p, 1, remainingMs(deadline));
    if (ready > 0)
      return true;
    if (ready == 0 || errno != EINTR)
      return false;
  }
}

/// Sends or receives exactly `count` bytes before the deadline.
bool transfer(int fd, void *data, size_t count, bool sending,
              Clock::time_point deadline) {
  auto *at = static_cast<char *>(data);
  while (count > 0) {
    if (!waitFor(fd, sending ? POLLOUT : POLLIN, deadline))
      return false;
    ssize_t done = sending ? ::send(fd, at, count, MSG_NOSIGNAL)
                           : ::recv(fd, at, count, 0);
    if (done < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (done <= 0)
      return false;
    at += done;
    count -= static_cast<size_t>(done);
  }
  return true;
}

void putU32(unsigned char *at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    at[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t getU32(const unsigned char *at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(at[i]) << (8 * i);
  return v;
}

/// The reply header: magic, status, length.
bool reply(int fd, uint32_t status, const void *payload, uint32_t length,
           Clock::time_point deadline) {
  unsigned char header[16];
  std::memcpy(header, kMagic, 8);
  putU32(header + 8, status);
  putU32(header + 12, length);
  return transfer(fd, header, sizeof header, true, deadline) &&
         transfer(fd, const_cast<void *>(payload), length, true, deadline);
}

std::string serve(int port, int size, const void *bytes, size_t count,
                  Clock::time_point deadline) {
  const std::string where = "rank 0 (port " + std::to_string(port) + "): ";
  Socket listener(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  bool v6 = listener.fd >= 0;
  if (!v6)
    listener.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener.fd < 0)
    return where + "socket: " + std::strerror(errno);
  int on = 1, off = 0;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  int bound;
  if (v6) {
    // Both families on one socket (a rank may name rank 0's host by an
    // IPv4 address).
    ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(static_cast<uint16_t>(port));
    bound = ::bind(listener.fd, reinterpret_cast<sockaddr *>(&address),
                   sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    bound = ::bind(listener.fd, reinterpret_cast<sockaddr *>(&address),
                   sizeof address);
  }
  if (bound != 0)
    return where + "cannot listen: " + std::strerror(errno);
  if (::listen(listener.fd, size) != 0)
    return where + "listen: " + std::strerror(errno);
  std::set<uint32_t> served;
  while (static_cast<int>(served.size()) < size - 1) {
    if (!waitFor(listener.fd, POLLIN, deadline))
      break;
    Socket peer(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (peer.fd < 0)
      continue;
    unsigned char hello[16];
    // A connection that says nothing valid is not a rank: dropped.
    if (!transfer(peer.fd, hello, sizeof hello, false, deadline) ||
        std::memcmp(hello, kMagic, 8) != 0)
      continue;
    const uint32_t rank = getU32(hello + 8), theirSize = getU32(hello + 12);
    std::string refusal;
    if (theirSize != static_cast<uint32_t>(size))
      refusal = "rank " + std::to_string(rank) + " says the job has " +
                std::to_string(theirSize) + " ranks, rank 0 " +
                std::to_string(size);
    else if (rank == 0 || rank >= static_cast<uint32_t>(size))
      refusal = "a rank " + std::to_string(rank) + " in a job of " +
                std::to_string(size);
    else if (served.count(rank))
      refusal = "rank " + std::to_string(rank) + " connected twice";
    if (!refusal.empty()) {
      reply(peer.fd, 1, refusal.data(), static_cast<uint32_t>(refusal.size()),
            deadline);
      return where + refusal;
    }
    if (reply(peer.fd, 0, bytes, static_cast<uint32_t>(count), deadline))
      served.insert(rank);
  }
  if (static_cast<int>(served.size()) == size - 1)
    return "";
  std::string missing;
  for (int r = 1; r < size; ++r)
    if (!served.count(static_cast<uint32_t>(r)))
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  return where + "rank" + (size - 1 - served.size() > 1 ? "s " : " ") +
         missing + " did not connect before the timeout";
}

std::string fetch(const std::string &host, int port, int rank, int size,
                  void *bytes, size_t count, Clock::time_point deadline) {
  const std::string where = "rank " + std::to_string(rank) + ": ";
  const std::string target = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                            &found);
      e != 0)
    return where + "cannot resolve rank 0's host '" + host +
           "': " + gai_strerror(e);
  // Rank 0 may not listen yet: retry every 50 ms until the deadline.
  Socket connection;
  std::string lastError = "no address";
  while (connection.fd < 0) {
    for (addrinfo *a = found; a && connection.fd < 0; a = a->ai_next) {
      Socket attempt(
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (attempt.fd < 0)
        continue;
      if (::connect(attempt.fd, a->ai_addr, a->ai_addrlen) == 0) {
        std::swap(connection.fd, attempt.fd);
        break;
      }
      lastError = std::strerror(errno);
    }
    if (connection.fd >= 0 || remainingMs(deadline) == 0)
      break;
    ::usleep(50 * 1000);
  }
  ::freeaddrinfo(found);
  if (connection.fd < 0)
    return where + "could not reach rank 0 at " + target +
           " before the timeout (" + lastError + ")";
  unsigned char hello[16];
  std::memcpy(hello, kMagic, 8);
  putU32(hello + 8, static_cast<uint32_t>(rank));
  putU32(hello + 12, static_cast<uint32_t>(size));
  unsigned char header[16];
  if (!transfer(connection.fd, hello, sizeof hello, true, deadline) ||
      !transfer(connection.fd, header, sizeof header, false, deadline) ||
      std::memcmp(header, kMagic, 8) != 0)
    return where + "rank 0 at " + target + " did not answer";
  const uint32_t status = getU32(header + 8), length = getU32(header + 12);
  if (status != 0) {
    std::string reason(std::min<uint32_t>(length, 4096), '\0');
    transfer(connection.fd, &reason[0], reason.size(), false, deadline);
    return where + "rank 0 refused it: " + reason;
  }
  if (length != count)
    return where + "rank 0 sent " + std::to_string(length) + " bytes, not " +
           std::to_string(count);
  if (!transfer(connection.fd, bytes, count, false, deadline))
    return where + "the connection to rank 0 at " + target + " broke";
  return "";
}

} // namespace

std::string tcpBroadcast(const std::string &host, int port, int rank, int size,
                         void *bytes, size_t count, int timeoutMs) {
  if (size < 1 || rank < 0 || rank >= size)
    return "rank " + std::to_string(rank) + " is not in a job of " +
           std::to_string(size);
  if (port <= 0 || port > 65535)
    return "rank " + std::to_string(rank) + ": port " + std::to_string(port) +
           " is not a TCP port";
  if (size == 1)
    return "";
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
  return rank == 0 ? serve(port, size, bytes, count, deadline)
                   : fetch(host, port, rank, size, bytes, count, deadline);
}

} // namespace ampc

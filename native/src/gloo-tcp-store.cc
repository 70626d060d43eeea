#include "gloo-tcp-store.h"

#include <arpa/inet.h>
#include <gloo/common/error.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace tandem_gloo {

using Clock = std::chrono::steady_clock;

namespace {

int ConnectOnce(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) { close(fd); fd = -1; }
  }
  freeaddrinfo(found);
  if (fd >= 0) { int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); }
  return fd;
}

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : where_("tcp://" + host + ":" + std::to_string(port)), timeout_(timeout) {
  auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(10);
  while ((fd_ = ConnectOnce(host, port)) < 0) {  // the store's host may not be up yet: retry, backing off
    if (Clock::now() + pause > deadline)
      GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, " unreachable for ", timeout.count(), " ms: ", strerror(errno));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

TcpStore::~TcpStore() { if (fd_ >= 0) close(fd_); }

void TcpStore::set(const std::string& key, const std::vector<char>& data) { request("SET", key, data, timeout_); }

std::vector<char> TcpStore::get(const std::string& key) { return request("GET", key, {}, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  auto deadline = Clock::now() + timeout;
  for (const auto& key : keys) request("WAIT", key, {}, std::chrono::milliseconds(MsLeft(deadline)));
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  auto d = std::to_string(delta);
  auto reply = request("ADD", key, std::vector<char>(d.begin(), d.end()), timeout_);
  return std::stoll(std::string(reply.begin(), reply.end()));
}

std::vector<char> TcpStore::request(const char* command, const std::string& key, const std::vector<char>& value,
                                    std::chrono::milliseconds timeout) {
  std::string head = std::string(command) + " " + std::to_string(timeout.count()) + " " + std::to_string(key.size()) +
                     " " + std::to_string(value.size()) + "\n";
  sendAll(head.data(), head.size());
  sendAll(key.data(), key.size());
  sendAll(value.data(), value.size());
  // The server answers a timed-out GET/WAIT itself; the extra second covers the trip.
  auto deadline = Clock::now() + timeout + std::chrono::seconds(1);
  std::string line = readLine(deadline);
  auto space = line.find(' ');
  if (space == std::string::npos) GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": malformed reply '", line, "'");
  std::vector<char> body(std::stoul(line.substr(space + 1)));
  recvAll(body.data(), body.size(), deadline);
  if (line.compare(0, space, "OK") == 0) return body;
  GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": ", std::string(body.begin(), body.end()));
}

void TcpStore::sendAll(const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": send failed: ", strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void TcpStore::recvAll(char* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    pollfd pf{fd_, POLLIN, 0};
    int ready = poll(&pf, 1, MsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": no reply before the deadline");
    ssize_t k = ::recv(fd_, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": connection closed by the store");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

std::string TcpStore::readLine(Clock::time_point deadline) {
  std::string line;
  for (char c = 0;;) {
    recvAll(&c, 1, deadline);
    if (c == '\n') return line;
    line += c;
  }
}

}  // namespace tandem_gloo

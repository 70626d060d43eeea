#include "gloo-tcp-store.h"

#include "hmac-sha256.h"

#include <arpa/inet.h>
#include <gloo/common/error.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
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

// The most bytes a reply may carry (the server's bound on a value, store-protocol.ts).
constexpr size_t kMaxReplyBytes = size_t(1) << 30;
constexpr size_t kMaxLine = 256;

std::string NonceHex() {
  Sha256::Digest n{};
  size_t got = 0;
  while (got < n.size()) {
    ssize_t k = getrandom(n.data() + got, n.size() - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) GLOO_THROW_IO_EXCEPTION("rendezvous store: no random bytes for a nonce: ", strerror(errno));
    got += static_cast<size_t>(k);
  }
  return ToHex(n);
}

bool SameBytes(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; i++) diff |= a[i] ^ b[i];
  return diff == 0;
}

bool IsHex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout, const std::string& secret)
    : where_("tcp://" + host + ":" + std::to_string(port)), timeout_(timeout) {
  auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(10);
  while ((fd_ = ConnectOnce(host, port)) < 0) {  // the store's host may not be up yet: retry, backing off
    if (Clock::now() + pause > deadline)
      GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, " unreachable for ", timeout.count(), " ms: ", strerror(errno));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  if (!secret.empty()) {
    try {
      handshake(secret, deadline + std::chrono::seconds(10));
    } catch (...) {
      close(fd_);
      fd_ = -1;
      throw;
    }
  }
}

// src/world/job-secret.ts: a nonce each way, both sides prove the secret, then the connection's key.
void TcpStore::handshake(const std::string& secret, Clock::time_point deadline) {
  std::string cn = NonceHex();
  std::string hello = "TANDEM-AUTH 1 store " + cn + "\n";
  sendAll(hello.data(), hello.size());
  std::string answer = readLine(deadline);
  auto space = answer.find(' ');
  std::string sn = space == std::string::npos ? "" : answer.substr(0, space);
  std::string proof = space == std::string::npos ? "" : answer.substr(space + 1);
  if (!IsHex64(sn) || !IsHex64(proof))
    GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, " did not answer tandem's handshake");
  if (ToHex(HmacSha256::of(secret, "store server " + cn + " " + sn)) != proof)
    GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, " does not hold this job's secret (TANDEM_JOB_SECRET)");
  std::string mine = ToHex(HmacSha256::of(secret, "store client " + cn + " " + sn)) + "\n";
  sendAll(mine.data(), mine.size());
  if (readLine(deadline) != "OK")
    GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, " refused this rank's job secret");
  key_ = HmacSha256::of(secret, "store session " + cn + " " + sn);
  authenticated_ = true;
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
  if (authenticated_) {
    HmacSha256 tag(std::string(reinterpret_cast<const char*>(key_.data()), key_.size()));
    tag.update("c " + std::to_string(sent_++) + "\n");
    tag.update(head);
    tag.update(key);
    tag.update(value.data(), value.size());
    auto t = tag.digest();
    sendAll(reinterpret_cast<const char*>(t.data()), t.size());
  }
  // The server answers a timed-out GET/WAIT itself; the extra second covers the trip.
  auto deadline = Clock::now() + timeout + std::chrono::seconds(1);
  std::string line = readLine(deadline);
  auto space = line.find(' ');
  std::string size = space == std::string::npos ? "" : line.substr(space + 1);
  if (space == std::string::npos || size.empty() || size.size() > 16 ||
      size.find_first_not_of("0123456789") != std::string::npos || std::stoull(size) > kMaxReplyBytes)
    GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": malformed reply '", line.substr(0, 80), "'");
  std::vector<char> body(std::stoull(size));
  recvAll(body.data(), body.size(), deadline);
  if (authenticated_) {
    Sha256::Digest got;
    recvAll(reinterpret_cast<char*>(got.data()), got.size(), deadline);
    HmacSha256 tag(std::string(reinterpret_cast<const char*>(key_.data()), key_.size()));
    tag.update("s " + std::to_string(received_++) + "\n");
    tag.update(line + "\n");
    tag.update(body.data(), body.size());
    auto want = tag.digest();
    if (!SameBytes(want.data(), got.data(), got.size()))
      GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": a reply whose tag does not match (not host 0's store)");
  }
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
    if (line.size() >= kMaxLine) GLOO_THROW_IO_EXCEPTION("rendezvous store ", where_, ": a reply line over ", kMaxLine, " bytes");
    line += c;
  }
}

}  // namespace tandem_gloo

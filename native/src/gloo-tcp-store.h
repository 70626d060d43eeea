// A client of tandem's rendezvous store (src/collectives/gloo/tcp-store-server.ts), as
// the gloo::rendezvous::Store that Gloo's connectFullMesh calls on the rank's thread.
// Synchronous sockets: no JavaScript runs while Gloo waits on it.
//
// Protocol (binary-safe, one request at a time per connection):
//   request: "<SET|GET|WAIT|ADD> <timeoutMs> <keyBytes> <valueBytes>\n" <key> <value>
//   reply:   "OK <valueBytes>\n" <value>   |   "ERR <messageBytes>\n" <message>
// GET and WAIT are answered when the key exists, or with ERR after timeoutMs naming the key.
// With a secret (the job's TANDEM_JOB_SECRET, or an in-process communicator's own), the connection opens with the
// secret's handshake and every request and reply carries a 32-byte tag (src/world/job-secret.ts).
#pragma once

#include <gloo/rendezvous/store.h>

#include <array>
#include <cstdint>

#include <chrono>
#include <string>
#include <vector>

namespace tandem_gloo {

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Connects to host:port, retrying until `timeout` (the server may start after this rank).
  // `secret`: the job's (or an in-process communicator's own); empty: a store without one.
  TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout, const std::string& secret);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // The key's integer value after adding `delta` (a missing key counts as 0).
  int64_t add(const std::string& key, int64_t delta);

 private:
  std::vector<char> request(const char* command, const std::string& key, const std::vector<char>& value,
                            std::chrono::milliseconds timeout);
  void sendAll(const char* p, size_t n);
  void recvAll(char* p, size_t n, std::chrono::steady_clock::time_point deadline);
  std::string readLine(std::chrono::steady_clock::time_point deadline);
  // Proves TANDEM_JOB_SECRET to the store and checks it holds it (src/world/job-secret.ts).
  void handshake(const std::string& secret, std::chrono::steady_clock::time_point deadline);

  std::string where_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  // The job secret's connection key and the sequence of each direction's messages (tags on every request and reply).
  bool authenticated_ = false;
  std::array<uint8_t, 32> key_{};
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
};

}  // namespace tandem_gloo

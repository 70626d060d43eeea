// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the job secret's handshake and message tags of the rendezvous
// store client (gloo-tcp-store.cc; the protocol is src/world/job-secret.ts). Self-contained: the addon links no
// OpenSSL. test/job-secret.test.ts checks the C++ client against node:crypto's side of the same exchange.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace tandem_gloo {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;
  Sha256() { reset(); }
  void reset() {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::memcpy(h_, init, sizeof(h_));
    bytes_ = 0;
    fill_ = 0;
  }
  void update(const void* data, size_t n) {
    auto p = static_cast<const uint8_t*>(data);
    bytes_ += n;
    while (n > 0) {
      size_t k = std::min(n, sizeof(block_) - fill_);
      std::memcpy(block_ + fill_, p, k);
      fill_ += k;
      p += k;
      n -= k;
      if (fill_ == sizeof(block_)) { compress(); fill_ = 0; }
    }
  }
  void update(const std::string& s) { update(s.data(), s.size()); }
  Digest digest() {
    uint64_t bits = bytes_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (fill_ != 56) update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(len, 8);
    Digest out;
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 4; j++) out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
    return out;
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void compress() {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
      w[i] = (uint32_t(block_[4 * i]) << 24) | (uint32_t(block_[4 * i + 1]) << 16) |
             (uint32_t(block_[4 * i + 2]) << 8) | uint32_t(block_[4 * i + 3]);
    for (int i = 16; i < 64; i++) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; i++) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h_[0] += a; h_[1] += b; h_[2] += c; h_[3] += d; h_[4] += e; h_[5] += f; h_[6] += g; h_[7] += h;
  }
  uint32_t h_[8];
  uint8_t block_[64];
  size_t fill_ = 0;
  uint64_t bytes_ = 0;
};

// HMAC-SHA256 under `key`, fed with update() like Sha256.
class HmacSha256 {
 public:
  explicit HmacSha256(const std::string& key) {
    uint8_t k[64] = {0};
    if (key.size() > 64) {
      Sha256 s;
      s.update(key);
      auto d = s.digest();
      std::memcpy(k, d.data(), d.size());
    } else {
      std::memcpy(k, key.data(), key.size());
    }
    for (int i = 0; i < 64; i++) { ipad_[i] = k[i] ^ 0x36; opad_[i] = k[i] ^ 0x5c; }
    inner_.update(ipad_, 64);
  }
  void update(const void* p, size_t n) { inner_.update(p, n); }
  void update(const std::string& s) { inner_.update(s); }
  Sha256::Digest digest() {
    auto in = inner_.digest();
    Sha256 outer;
    outer.update(opad_, 64);
    outer.update(in.data(), in.size());
    return outer.digest();
  }
  static Sha256::Digest of(const std::string& key, const std::string& text) {
    HmacSha256 h(key);
    h.update(text);
    return h.digest();
  }

 private:
  uint8_t ipad_[64], opad_[64];
  Sha256 inner_;
};

inline std::string ToHex(const Sha256::Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) { out += digits[b >> 4]; out += digits[b & 15]; }
  return out;
}

}  // namespace tandem_gloo

// The fp16/bf16 communication hooks' per-element passes (src/pipeline/hooks/half-float.ts,
// compress-hook.ts) in one pass each: the compression with error feedback, and the mean of
// the gathered codes. Each gives the JS's bits: the same integer arithmetic on the float32
// bits for the codes (round to nearest even, fp16 saturated at ±65504 when packing, NaN as
// the JS makes it), and float32 additions in rank order then one float32 division (a JS
// number rounded to float32 at each store gives the same bits: a double holds more than
// 2x24+2 bits). Built with -ffp-contract=off and without -ffast-math: no fused or
// reassociated arithmetic.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "dnnl-context.h"

namespace tandem {
namespace {

constexpr size_t kBlock = 1024;

enum class HalfFormat { Fp16, Bf16 };

HalfFormat ReadFormat(const Napi::Value& v) {
  if (v.IsString()) {
    const std::string s = v.As<Napi::String>().Utf8Value();
    if (s == "fp16") return HalfFormat::Fp16;
    if (s == "bf16") return HalfFormat::Bf16;
  }
  throw Napi::TypeError::New(v.Env(), "format must be 'fp16' or 'bf16'");
}

inline uint32_t Bits(float x) { uint32_t b; std::memcpy(&b, &x, 4); return b; }
inline float FromBits(uint32_t b) { float x; std::memcpy(&x, &b, 4); return x; }

// a + b as the JS computes it, NaN payload included: IEEE leaves open which NaN two NaNs give,
// x86 gives the instruction's first operand's, and the compiler may put either first (the
// addition commutes); V8 (x64) gives the right operand's, made quiet, in every tier
// (test/half-float.test.ts checks inputs where two NaNs meet), so that one is chosen here.
inline float AddAsJs(float a, float b) {
  const float s = a + b;
  return (a != a && b != b) ? FromBits(Bits(b) | 0x400000u) : s;
}

// encodeFp16Codes: toFp16's code, finite values beyond ±65504 saturated to ±65504. Without branches
// (the magnitudes of a gradient make them unpredictable): both roundings computed, one chosen.
// Below 2^-14 (fp16 subnormals, and 0 below 2^-25): adding 0.5f rounds the magnitude to a
// multiple of 2^-24 to nearest even, in the hardware's rounding (IEEE's default; Node never
// changes it), and the low bits of the sum are the code. From 2^-14 up: the exponent rebiased,
// the 13 dropped bits rounded to nearest even by adding 0xfff + the kept lowest bit (a carry
// into the exponent is right), then saturated at 0x7bff.
inline uint16_t EncodeFp16(uint32_t b) {
  const uint32_t sign = (b >> 16) & 0x8000, abs = b & 0x7fffffff;
  const uint32_t small = Bits(FromBits(abs) + 0.5f) - 0x3f000000u;
  const uint32_t rounded = (abs - (112u << 23) + 0xfff + ((abs >> 13) & 1)) >> 13;
  const uint32_t normal = rounded < 0x7bff ? rounded : 0x7bff;
  const uint32_t finite = abs < (113u << 23) ? small : normal;
  const uint32_t h = abs < 0x7f800000u ? finite : abs == 0x7f800000u ? 0x7c00u : 0x7e00u;
  return static_cast<uint16_t>(sign | h);
}

// encodeBf16Codes: the top 16 bits rounded to nearest even; a NaN keeps its top bits, made quiet.
inline uint16_t EncodeBf16(uint32_t b) {
  if ((b & 0x7f800000) == 0x7f800000 && (b & 0x7fffff) != 0) return static_cast<uint16_t>((b >> 16) | 0x40);
  return static_cast<uint16_t>(((b + 0x7fff + ((b >> 16) & 1)) >> 16) & 0xffff);
}

// half-float.ts's fp16Value as float32 bits: exact values; NaN codes decode to V8's NaN (0x7fc00000).
struct Fp16Table {
  float value[65536];
  Fp16Table() {
    for (uint32_t h = 0; h < 65536; h++) {
      const double sign = (h & 0x8000) ? -1.0 : 1.0;
      const int exp = (h >> 10) & 0x1f;
      const double m = h & 0x3ff;
      if (exp == 0) value[h] = static_cast<float>(sign * m * std::ldexp(1.0, -24));
      else if (exp == 31) value[h] = m != 0 ? FromBits(0x7fc00000u) : static_cast<float>(sign * INFINITY);
      else value[h] = static_cast<float>(sign * (1 + m / 1024) * std::ldexp(1.0, exp - 15));
    }
  }
};

const float* Fp16Decode() {
  static const Fp16Table table;  // thread-safe initialisation, once per process
  return table.value;
}

inline float DecodeBf16(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

// One block of compressWithFeedback: codes, sent, and (with a residual) corrected and the new residual.
template <HalfFormat F>
void CompressRange(const float* gradient, float* residual, float* corrected, float* sent, uint16_t* codes, size_t n) {
  const float* fp16 = Fp16Decode();
  for (size_t i = 0; i < n; i++) {
    const float c = residual ? AddAsJs(gradient[i], residual[i]) : gradient[i];
    const uint32_t b = Bits(c);
    const uint16_t h = F == HalfFormat::Fp16 ? EncodeFp16(b) : EncodeBf16(b);
    const float s = F == HalfFormat::Fp16 ? fp16[h] : DecodeBf16(h);
    codes[i] = h;
    sent[i] = s;
    if (residual) {
      corrected[i] = c;
      const float left = c - s;
      residual[i] = std::isfinite(left) ? left : 0.f;
    }
  }
}

// halfCompress(format, gradient, residual | null, corrected, sent, packed): compressWithFeedback.
// n = gradient.length; packed (ceil(n/2) words) gets the codes, two per word (the little-endian
// halves; the high half of an odd n's last word 0); sent what they decode to. With a residual:
// corrected = gradient + residual (float32), the codes are corrected's, the residual becomes
// corrected - sent (0 where not finite). Without one, corrected is not touched (may be null).
TANDEM_SIMD Napi::Value HalfCompress(const Napi::CallbackInfo& info) {
  const HalfFormat format = ReadFormat(info[0]);
  if (!info[1].IsTypedArray()) throw Napi::TypeError::New(info.Env(), "gradient must be a Float32Array");
  const size_t n = info[1].As<Napi::TypedArray>().ElementLength();
  const float* gradient = F32(info[1], n, "gradient");
  float* residual = OptionalF32(info[2], n, "residual");
  float* corrected = residual ? F32(info[3], n, "corrected") : nullptr;
  float* sent = F32(info[4], n, "sent");
  float* packed = F32(info[5], (n + 1) / 2, "packed");
  uint16_t* codes = reinterpret_cast<uint16_t*>(packed);
  if (format == HalfFormat::Fp16) CompressRange<HalfFormat::Fp16>(gradient, residual, corrected, sent, codes, n);
  else CompressRange<HalfFormat::Bf16>(gradient, residual, corrected, sent, codes, n);
  if (n % 2 == 1) codes[n] = 0;
  return info.Env().Undefined();
}

template <HalfFormat F>
inline float Decode(const float* fp16, uint16_t h) { return F == HalfFormat::Fp16 ? fp16[h] : DecodeBf16(h); }

template <HalfFormat F>
void MeanDecoded(const uint16_t* gathered, size_t words, uint32_t ranks, float* out, size_t n) {
  const float* fp16 = Fp16Decode();
  // JS divides in double and rounds to float32: float32 division gives the same bits, and for a
  // power of two so does multiplying by the exact reciprocal (as reduceMean).
  const bool powerOfTwo = (ranks & (ranks - 1)) == 0;
  const float count = static_cast<float>(ranks), reciprocal = 1.f / count;
  float acc[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t len = std::min(kBlock, n - b);
    for (size_t i = 0; i < len; i++) acc[i] = Decode<F>(fp16, gathered[b + i]);
    for (uint32_t r = 1; r < ranks; r++) {
      const uint16_t* codes = gathered + 2 * words * r + b;
      for (size_t i = 0; i < len; i++) acc[i] = AddAsJs(acc[i], Decode<F>(fp16, codes[i]));
    }
    if (ranks == 1) {
      for (size_t i = 0; i < len; i++) out[b + i] = acc[i];
    } else if (powerOfTwo) {
      for (size_t i = 0; i < len; i++) out[b + i] = acc[i] * reciprocal;
    } else {
      for (size_t i = 0; i < len; i++) out[b + i] = acc[i] / count;
    }
  }
}

// halfMeanDecoded(format, gathered, ranks, out): out[i] = (value of rank 0's code i + rank 1's + ...)
// / ranks, summed in float32 in rank order, for i < out.length; gathered holds each rank's
// ceil(out.length / 2) packed words, rank after rank.
TANDEM_SIMD Napi::Value HalfMeanDecoded(const Napi::CallbackInfo& info) {
  const HalfFormat format = ReadFormat(info[0]);
  const int ranks = Int(info[2], "ranks");
  if (ranks < 1) throw Napi::RangeError::New(info.Env(), "ranks must be at least 1");
  if (!info[3].IsTypedArray()) throw Napi::TypeError::New(info.Env(), "out must be a Float32Array");
  const size_t n = info[3].As<Napi::TypedArray>().ElementLength(), words = (n + 1) / 2;
  float* out = F32(info[3], n, "out");
  const uint16_t* gathered = reinterpret_cast<const uint16_t*>(F32(info[1], words * ranks, "gathered"));
  if (format == HalfFormat::Fp16) MeanDecoded<HalfFormat::Fp16>(gathered, words, static_cast<uint32_t>(ranks), out, n);
  else MeanDecoded<HalfFormat::Bf16>(gathered, words, static_cast<uint32_t>(ranks), out, n);
  return info.Env().Undefined();
}

}  // namespace

void RegisterHalfOps(Napi::Env env, Napi::Object exports) {
  exports.Set("halfCompress", Napi::Function::New(env, HalfCompress));
  exports.Set("halfMeanDecoded", Napi::Function::New(env, HalfMeanDecoded));
}

}  // namespace tandem

// The comm side's arithmetic on flat parameter ranges: the mean over device
// slots of an all-reduce, and the optimizer updates of src/optim/flat-optimizer.ts.
// Each does what the JS does, in the same order and precision, so the two give
// the same bits: float32 sums in rank order; the updates in double (JS numbers),
// rounded to float32 when stored. Built with -ffp-contract=off (no fused multiply-add).
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <string>
#include <vector>

#include <immintrin.h>

#include <cstring>

#include "dnnl-context.h"

namespace tandem {
namespace {

constexpr size_t kBlock = 1024;

void ReadRange(const Napi::CallbackInfo& info, size_t at, size_t* start, size_t* end) {
  int s = Int(info[at], "start"), e = Int(info[at + 1], "end");
  if (s < 0 || e < s) throw Napi::RangeError::New(info.Env(), "need 0 <= start <= end");
  *start = static_cast<size_t>(s);
  *end = static_cast<size_t>(e);
}

double Number(const Napi::Value& v, const char* name) {
  if (!v.IsNumber()) throw Napi::TypeError::New(v.Env(), std::string(name) + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

// reduceMean(slots, out, start, end): out[i] = (slots[0][i] + ... + slots[n-1][i]) / n for
// i in [start, end), summed in float32 in slot order; out may be one of the slots.
TANDEM_SIMD Napi::Value ReduceMean(const Napi::CallbackInfo& info) {
  size_t start, end;
  ReadRange(info, 2, &start, &end);
  if (!info[0].IsArray()) throw Napi::TypeError::New(info.Env(), "slots must be an array of Float32Arrays");
  auto list = info[0].As<Napi::Array>();
  const uint32_t n = list.Length();
  if (n == 0) throw Napi::RangeError::New(info.Env(), "slots must hold at least one Float32Array");
  std::vector<const float*> slots(n);
  for (uint32_t r = 0; r < n; r++) slots[r] = F32(list.Get(r), end, "slots[r]");
  float* out = F32(info[1], end, "out");
  // JS divides in double and rounds to float32; float32 division gives the same bits (a double
  // has more than 2x24+2 bits: rounding twice is innocuous), and for n a power of two so does
  // multiplying by the exact reciprocal.
  const bool powerOfTwo = (n & (n - 1)) == 0;
  const float count = static_cast<float>(n), reciprocal = 1.f / count;
  float acc[kBlock];
  for (size_t b = start; b < end; b += kBlock) {
    const size_t len = std::min(kBlock, end - b);
    for (size_t i = 0; i < len; i++) acc[i] = slots[0][b + i];
    for (uint32_t r = 1; r < n; r++) {
      const float* src = slots[r] + b;
      for (size_t i = 0; i < len; i++) acc[i] += src[i];
    }
    if (powerOfTwo) {
      for (size_t i = 0; i < len; i++) out[b + i] = acc[i] * reciprocal;
    } else {
      for (size_t i = 0; i < len; i++) out[b + i] = acc[i] / count;
    }
  }
  return info.Env().Undefined();
}

// sgdUpdate(params, grads, acc | null, start, end, lr, momentum)
TANDEM_SIMD Napi::Value SgdUpdate(const Napi::CallbackInfo& info) {
  size_t start, end;
  ReadRange(info, 3, &start, &end);
  float* p = F32(info[0], end, "params");
  const float* g = F32(info[1], end, "grads");
  float* acc = OptionalF32(info[2], end, "acc");
  const double lr = Number(info[5], "lr"), momentum = Number(info[6], "momentum");
  if (acc) {
    for (size_t i = start; i < end; i++) {
      const float a = static_cast<float>(acc[i] * momentum + static_cast<double>(g[i]));
      acc[i] = a;
      p[i] = static_cast<float>(p[i] - lr * a);
    }
  } else {
    for (size_t i = start; i < end; i++) p[i] = static_cast<float>(p[i] - lr * g[i]);
  }
  return info.Env().Undefined();
}

// adamUpdate(params, grads, m, v, start, end, lr, beta1, beta2, epsilon, c1, c2): c1, c2 the
// bias corrections 1 - beta^step, computed by the caller (JS's Math.pow).
TANDEM_SIMD Napi::Value AdamUpdate(const Napi::CallbackInfo& info) {
  size_t start, end;
  ReadRange(info, 4, &start, &end);
  float* p = F32(info[0], end, "params");
  const float* g = F32(info[1], end, "grads");
  float* m = F32(info[2], end, "m");
  float* v = F32(info[3], end, "v");
  const double lr = Number(info[6], "lr"), beta1 = Number(info[7], "beta1"), beta2 = Number(info[8], "beta2");
  const double epsilon = Number(info[9], "epsilon"), c1 = Number(info[10], "c1"), c2 = Number(info[11], "c2");
  for (size_t i = start; i < end; i++) {
    const double gi = g[i];
    const float mi = static_cast<float>(beta1 * m[i] + (1 - beta1) * gi);
    const float vi = static_cast<float>(beta2 * v[i] + (1 - beta2) * gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = static_cast<float>(p[i] - lr * (mi / c1) / (std::sqrt(vi / c2) + epsilon));
  }
  return info.Env().Undefined();
}

// firstNonFinite(values): the index of the first NaN or ±Infinity in the Float32Array, or -1
// (a gradient's check before it is handed over). Blocks are tested branch-free on the exponent
// bits (all ones: not finite), so the loop vectorises; only a block that has one is searched.
TANDEM_SIMD long FirstNonFiniteIn(const float* v, size_t n) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(v);
  constexpr uint32_t kExponent = 0x7f800000u;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t end = std::min(n, b + kBlock);
    uint32_t any = 0;
    for (size_t i = b; i < end; i++) any |= static_cast<uint32_t>((bits[i] & kExponent) == kExponent);
    if (any == 0) continue;
    for (size_t i = b; i < end; i++)
      if ((bits[i] & kExponent) == kExponent) return static_cast<long>(i);
  }
  return -1;
}

// A Float32Array argument, whole (its length is the caller's count): a TypeError names it otherwise.
Napi::Float32Array WholeF32(const Napi::Value& v, const char* name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw Napi::TypeError::New(v.Env(), std::string(name) + " must be a Float32Array");
  return v.As<Napi::Float32Array>();
}

Napi::Value FirstNonFinite(const Napi::CallbackInfo& info) {
  auto values = WholeF32(info[0], "values");
  return Napi::Number::New(info.Env(), static_cast<double>(FirstNonFiniteIn(values.Data(), values.ElementLength())));
}

// dropoutMask(out: F32, base: int32, lo: uint32, kept: number): dropout's multiplier as seeded-random-layers.ts's
// dropoutMultiplier draws it, the same integer steps: z = base + i·0x9e3779b9, murmur3's finaliser, u = z's high 24
// bits; out[i] = kept (float32) where u >= lo, else 0.
TANDEM_SIMD Napi::Value DropoutMask(const Napi::CallbackInfo& info) {
  auto out = WholeF32(info[0], "out");
  if (!info[1].IsNumber() || !info[2].IsNumber() || !info[3].IsNumber())
    throw Napi::TypeError::New(info.Env(), "dropoutMask(out, base, lo, kept): base, lo and kept must be numbers");
  const size_t n = out.ElementLength();
  float* o = out.Data();
  const uint32_t base = static_cast<uint32_t>(info[1].As<Napi::Number>().Int32Value());
  const uint32_t lo = info[2].As<Napi::Number>().Uint32Value();
  const float kept = info[3].As<Napi::Number>().FloatValue();
  for (size_t i = 0; i < n; i++) {
    uint32_t z = base + static_cast<uint32_t>(i) * 0x9e3779b9u;
    z = (z ^ (z >> 16)) * 0x85ebca6bu;
    z = (z ^ (z >> 13)) * 0xc2b2ae35u;
    o[i] = ((z ^ (z >> 16)) >> 8) >= lo ? kept : 0.f;
  }
  return info.Env().Undefined();
}

__attribute__((target("avx512f"))) void StreamCopy(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
}

// copyFinite(src, dst, offset): src copied into dst from offset, and the index of src's first NaN or ±Infinity (or
// -1): a gradient's hand-over in one call. The copy streams past the caches where the CPU has AVX-512 (the comm
// thread reads it from another core) after a head that aligns dst to 64 bytes; the check reads src once more, from
// the caches when it is small enough to stay there.
Napi::Value CopyFinite(const Napi::CallbackInfo& info) {
  auto srcArray = WholeF32(info[0], "src");
  const size_t n = srcArray.ElementLength();
  const int offset = Int(info[2], "offset");
  if (offset < 0) throw Napi::RangeError::New(info.Env(), "offset must be non-negative");
  const float* src = srcArray.Data();
  float* dst = F32(info[1], static_cast<size_t>(offset) + n, "dst") + offset;
  size_t head = 0;
  if (StreamsAvx512() && n >= 1024) {
    while (head < n && reinterpret_cast<uintptr_t>(dst + head) % 64 != 0) head++;
    const size_t body = (n - head) / 16 * 16;
    std::memcpy(dst, src, head * sizeof(float));
    StreamCopy(dst + head, src + head, body);
    StoreFence();
    std::memcpy(dst + head + body, src + head + body, (n - head - body) * sizeof(float));
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
  return Napi::Number::New(info.Env(), static_cast<double>(FirstNonFiniteIn(src, n)));
}

}  // namespace

void RegisterFlatOps(Napi::Env env, Napi::Object exports) {
  exports.Set("copyFinite", Napi::Function::New(env, CopyFinite));
  exports.Set("dropoutMask", Napi::Function::New(env, DropoutMask));
  exports.Set("reduceMean", Napi::Function::New(env, ReduceMean));
  exports.Set("sgdUpdate", Napi::Function::New(env, SgdUpdate));
  exports.Set("adamUpdate", Napi::Function::New(env, AdamUpdate));
  exports.Set("firstNonFinite", Napi::Function::New(env, FirstNonFinite));
}

}  // namespace tandem

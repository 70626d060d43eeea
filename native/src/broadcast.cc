// Broadcasting arithmetic (add, sub, multiply, divide, minimum, maximum), comparisons, and sums or means over any axes, on Float32Arrays walked in
// memory order with per-operand strides (0 along a broadcast or reduced axis): the loops of
// src/engine/native/broadcast-kernels.ts, which give tfjs's cpu kernels' bits, in C++. The same operations in the
// same order: an element computed in float32 (JS computes it in double and rounds to float32: for + - * / of two
// float32 values that is the same number, double rounding being innocuous with 53 ≥ 2·24 + 2 bits); a reduction
// adds its elements in row-major order in double and rounds once; a mean divides each element by the count first,
// in double, rounded to float32, as tfjs's Mean does. Minimum and maximum are JS's Math.min and Math.max (NaN if
// either is; -0 below +0); a comparison writes tfjs's bool values (bytes 0 and 1), false for NaN.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dnnl-context.h"

namespace tandem {
namespace {

constexpr uint32_t kMaxRank = 8;

struct Dims {
  uint32_t rank = 0;
  int64_t d[kMaxRank] = {};
};

Dims ReadDims(const Napi::Value& v, const char* name) {
  if (!v.IsArray()) throw Napi::TypeError::New(v.Env(), std::string(name) + " must be an array of integers");
  auto a = v.As<Napi::Array>();
  if (a.Length() < 1 || a.Length() > kMaxRank)
    throw Napi::RangeError::New(v.Env(), std::string(name) + ": rank 1 to 8");
  Dims out;
  out.rank = a.Length();
  for (uint32_t i = 0; i < out.rank; i++) {
    int x = Int(a.Get(i), name);
    if (x < 0) throw Napi::RangeError::New(v.Env(), std::string(name) + " entries must be non-negative");
    out.d[i] = x;
  }
  return out;
}

// The elements of `shape`.
size_t Size(const Dims& shape) {
  size_t size = 1;
  for (uint32_t i = 0; i < shape.rank; i++) size *= static_cast<size_t>(shape.d[i]);
  return size;
}

// The floats an operand with these strides reaches over `shape` (the furthest element + 1).
size_t Extent(const Dims& shape, const Dims& strides) {
  size_t last = 0;
  for (uint32_t i = 0; i < shape.rank; i++) {
    if (shape.d[i] == 0) return 0;
    last += static_cast<size_t>((shape.d[i] - 1) * strides.d[i]);
  }
  return last + 1;
}

// Calls row(r, offsets) for every row of shape (all axes but the last), in memory order, with each operand's offset.
template <uint32_t kOperands, typename Row>
[[gnu::always_inline]] inline void ForEachRow(const Dims& shape, const Dims* strides, Row row) {
  const uint32_t rank = shape.rank;
  size_t rows = 1;
  for (uint32_t i = 0; i + 1 < rank; i++) rows *= static_cast<size_t>(shape.d[i]);
  int64_t index[kMaxRank] = {}, offsets[kOperands] = {};
  for (size_t r = 0; r < rows; r++) {
    row(r, offsets);
    for (int axis = static_cast<int>(rank) - 2; axis >= 0; axis--) {  // the odometer
      index[axis]++;
      for (uint32_t k = 0; k < kOperands; k++) offsets[k] += strides[k].d[axis];
      if (index[axis] < shape.d[axis]) break;
      for (uint32_t k = 0; k < kOperands; k++) offsets[k] -= strides[k].d[axis] * shape.d[axis];
      index[axis] = 0;
    }
  }
}

// Drops axes of one element and merges neighbours every operand walks in one run (out, and x of a reduction, are
// dense), so ForEachRow runs fewer, longer rows: a same-shape add becomes one row (resnet-mini's residual adds,
// [32, 32, 32, 16]: 0.28 → 0.21 ms, as the flat add). Offsets, and so the order of every sum, are unchanged.
template <uint32_t kOperands>
void Coalesce(Dims& shape, Dims* strides) {
  Dims s, t[kOperands];
  for (uint32_t i = 0; i < shape.rank; i++) {
    if (shape.d[i] == 1) continue;
    bool merge = s.rank > 0;
    for (uint32_t k = 0; k < kOperands && merge; k++) merge = t[k].d[s.rank - 1] == strides[k].d[i] * shape.d[i];
    if (!merge) s.rank++;
    s.d[s.rank - 1] = merge ? s.d[s.rank - 1] * shape.d[i] : shape.d[i];
    for (uint32_t k = 0; k < kOperands; k++) t[k].d[s.rank - 1] = strides[k].d[i];
  }
  if (s.rank == 0) s = Dims{1, {1}};
  shape = s;
  for (uint32_t k = 0; k < kOperands; k++) {
    t[k].rank = s.rank;
    strides[k] = t[k];
  }
}

template <int kOp>
inline float Apply(float a, float b) {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  if (kOp == 0) return a + b;
  if (kOp == 1) return a - b;
  if (kOp == 2) return a * b;
  if (kOp == 3) return a / b;
  if (kOp == 4) return (a != a || b != b) ? nan : a < b ? a : b < a ? b : std::signbit(a) ? a : b;  // Math.min
  return (a != a || b != b) ? nan : a > b ? a : b > a ? b : std::signbit(a) ? b : a;               // Math.max
}

template <int kOp>
inline uint8_t Compare(float a, float b) {
  if (kOp == 0) return a > b;
  if (kOp == 1) return a >= b;
  if (kOp == 2) return a < b;
  if (kOp == 3) return a <= b;
  return a == b;
}

template <int kOp, typename Out, typename F>
[[gnu::always_inline]] inline void Rows(Out* out, const float* a, const float* b, const Dims& shape, const Dims* strides, F f) {
  const int64_t n = shape.d[shape.rank - 1], ka = strides[0].d[shape.rank - 1], kb = strides[1].d[shape.rank - 1];
  ForEachRow<2>(shape, strides, [&](size_t r, const int64_t* o) {
    Out* __restrict y = out + r * n;
    const float* pa = a + o[0];
    const float* pb = b + o[1];
    if (ka == 1 && kb == 1)
      for (int64_t k = 0; k < n; k++) y[k] = f(pa[k], pb[k]);
    else if (ka == 1 && kb == 0)
      for (int64_t k = 0; k < n; k++) y[k] = f(pa[k], pb[0]);
    else if (ka == 0 && kb == 1)
      for (int64_t k = 0; k < n; k++) y[k] = f(pa[0], pb[k]);
    else
      for (int64_t k = 0; k < n; k++) y[k] = f(pa[k * ka], pb[k * kb]);
  });
}

template <int kOp>
[[gnu::always_inline]] inline void Binary(float* out, const float* a, const float* b, const Dims& shape, const Dims* strides) {
  Rows<kOp>(out, a, b, shape, strides, [](float p, float q) { return Apply<kOp>(p, q); });
}

template <int kOp>
[[gnu::always_inline]] inline void Comparison(uint8_t* out, const float* a, const float* b, const Dims& shape, const Dims* strides) {
  Rows<kOp>(out, a, b, shape, strides, [](float p, float q) { return Compare<kOp>(p, q); });
}

uint8_t* U8(const Napi::Value& v, size_t need, const char* name) {
  return TypedData<uint8_t>(v, napi_uint8_array, "Uint8Array", need, name);
}

// binaryStrided(op, out, a, aStrides, b, bStrides, shape): out (shape, row-major) = a ∘ b. op 0 add, 1 sub,
// 2 multiply, 3 divide, 4 minimum, 5 maximum (out a Float32Array); 6 greater, 7 greaterEqual, 8 less, 9 lessEqual,
// 10 equal (out a Uint8Array of 0 and 1).
TANDEM_SIMD Napi::Value BinaryStrided(const Napi::CallbackInfo& info) {
  int op = Int(info[0], "op");
  if (op < 0 || op > 10) throw Napi::RangeError::New(info.Env(), "op: 0 to 5 arithmetic, 6 to 10 comparisons");
  Dims shape = ReadDims(info[6], "shape");
  Dims strides[2] = {ReadDims(info[3], "aStrides"), ReadDims(info[5], "bStrides")};
  if (strides[0].rank != shape.rank || strides[1].rank != shape.rank)
    throw Napi::RangeError::New(info.Env(), "strides must have the shape's rank");
  const size_t size = Size(shape);
  const float* a = F32(info[2], Extent(shape, strides[0]), "a");
  const float* b = F32(info[4], Extent(shape, strides[1]), "b");
  if (op >= 6) {
    uint8_t* out = U8(info[1], size, "out");
    if (size == 0) return info.Env().Undefined();
    Coalesce<2>(shape, strides);
    switch (op) {
      case 6: Comparison<0>(out, a, b, shape, strides); break;
      case 7: Comparison<1>(out, a, b, shape, strides); break;
      case 8: Comparison<2>(out, a, b, shape, strides); break;
      case 9: Comparison<3>(out, a, b, shape, strides); break;
      default: Comparison<4>(out, a, b, shape, strides); break;
    }
    return info.Env().Undefined();
  }
  float* out = F32(info[1], size, "out");
  if (size == 0) return info.Env().Undefined();
  Coalesce<2>(shape, strides);
  switch (op) {
    case 0: Binary<0>(out, a, b, shape, strides); break;
    case 1: Binary<1>(out, a, b, shape, strides); break;
    case 2: Binary<2>(out, a, b, shape, strides); break;
    case 3: Binary<3>(out, a, b, shape, strides); break;
    case 4: Binary<4>(out, a, b, shape, strides); break;
    default: Binary<5>(out, a, b, shape, strides); break;
  }
  return info.Env().Undefined();
}

// acc[o] += term(x) over x's rows, each out element summing its terms in x's order whichever loop runs; a kept last
// axis (step 1) vectorises, the division too (resnet-mini's global average pool, [32, 16, 16, 32] over 1 and 2:
// 0.94 → 0.06 ms, sums 0.18 → 0.06; alone, one thread, AMD EPYC).
template <typename Term>
[[gnu::always_inline]] inline void ReduceRows(const Dims& shape, const Dims* strides, const float* x, double* acc, Term term) {
  const int64_t n = shape.d[shape.rank - 1], step = strides[0].d[shape.rank - 1];
  ForEachRow<1>(shape, strides, [&](size_t r, const int64_t* o) {
    const float* __restrict px = x + r * n;
    double* __restrict pa = acc + o[0];
    if (step == 1) {
      for (int64_t k = 0; k < n; k++) pa[k] += term(px[k]);
    } else if (step == 0) {
      double sum = pa[0];
      for (int64_t k = 0; k < n; k++) sum += term(px[k]);
      pa[0] = sum;
    } else {
      for (int64_t k = 0; k < n; k++) pa[k * step] += term(px[k]);
    }
  });
}

// reduceStrided(mean, x, shape, outStrides, out, outSize, count): out[o] = the sum over x (shape, row-major) of the
// elements whose offset by outStrides is o, in double, rounded once; mean: each element divided by count first.
TANDEM_SIMD Napi::Value ReduceStrided(const Napi::CallbackInfo& info) {
  const bool mean = info[0].ToBoolean().Value();
  Dims shape = ReadDims(info[2], "shape");
  Dims strides[1] = {ReadDims(info[3], "outStrides")};
  if (strides[0].rank != shape.rank) throw Napi::RangeError::New(info.Env(), "outStrides must have the shape's rank");
  const size_t size = Size(shape);
  int outSize = Int(info[5], "outSize");
  if (outSize < 0) throw Napi::RangeError::New(info.Env(), "outSize must be non-negative");
  const float* x = F32(info[1], size, "x");
  float* out = F32(info[4], static_cast<size_t>(outSize), "out");
  if (size > 0 && Extent(shape, strides[0]) > static_cast<size_t>(outSize))
    throw Napi::RangeError::New(info.Env(), "outStrides reach past out");
  if (!info[6].IsNumber()) throw Napi::TypeError::New(info.Env(), "count must be a number");
  const double count = info[6].As<Napi::Number>().DoubleValue();
  std::vector<double> acc(static_cast<size_t>(outSize), 0.0);
  if (size > 0) {
    Coalesce<1>(shape, strides);
    if (mean)
      ReduceRows(shape, strides, x, acc.data(), [count](float v) { return static_cast<float>(static_cast<double>(v) / count); });
    else
      ReduceRows(shape, strides, x, acc.data(), [](float v) { return v; });
  }
  for (size_t i = 0; i < acc.size(); i++) out[i] = static_cast<float>(acc[i]);
  return info.Env().Undefined();
}

}  // namespace

void RegisterBroadcast(Napi::Env env, Napi::Object exports) {
  exports.Set("binaryStrided", Napi::Function::New(env, BinaryStrided));
  exports.Set("reduceStrided", Napi::Function::New(env, ReduceStrided));
}

}  // namespace tandem

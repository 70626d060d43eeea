// The elementwise and reduction loops that dominate a training profile once
// convolutions and matmuls are native: relu and its gradient, adding a
// per-channel bias, and summing rows (the bias gradient). Each computes the
// same operations in the same order as the tfjs cpu kernel it replaces (whose
// JS arithmetic is double, rounded to float32 when stored).
#include <cmath>
#include <vector>

#include <algorithm>

#include "dnnl-context.h"

namespace tandem {
namespace {

size_t Count(const Napi::Value& v) {
  int n = Int(v, "size");
  if (n < 0) throw Napi::RangeError::New(v.Env(), "size must be non-negative");
  return static_cast<size_t>(n);
}

// relu(x, y, size, yShadow?): y = max(0, x) as Math.max: NaN stays NaN, -0 becomes 0; yShadow: y in bf16 too
TANDEM_SIMD Napi::Value Relu(const Napi::CallbackInfo& info) {
  size_t n = Count(info[2]);
  const float* x = F32(info[0], n, "x");
  float* y = F32(info[1], n, "y");
  uint16_t* shadow = OptionalShadowOut(info, 3, n);
  for (size_t from = 0, block = ShadowBlock(n, 1, shadow); from < n; from += block) {
    const size_t to = std::min(n, from + block);
    for (size_t i = from; i < to; i++) {
      float v = x[i];
      y[i] = (v > 0.f || v != v) ? v : 0.f;
    }
    if (shadow) CastToBf16(y + from, shadow + from, to - from);
  }
  return info.Env().Undefined();
}

// reluGrad(dy, x, dx | null, size, dxShadow?): dx = dy * step(x), step(x) = x > 0 ? 1 : 0, NaN for NaN; dxShadow: dx
// in bf16 too; with dxShadow and dx null, in bf16 alone (each block through a buffer of the kernel's own)
TANDEM_SIMD Napi::Value ReluGrad(const Napi::CallbackInfo& info) {
  size_t n = Count(info[3]);
  const float* dy = F32(info[0], n, "dy");
  const float* x = F32(info[1], n, "x");
  uint16_t* shadow = OptionalShadowOut(info, 4, n);
  float* dx = shadow ? OptionalF32(info[2], n, "dx") : F32(info[2], n, "dx");
  const size_t size = ShadowBlock(n, 1, shadow);
  thread_local std::vector<float> block;
  if (!dx) block.resize(size);
  for (size_t from = 0; from < n; from += size) {
    const size_t to = std::min(n, from + size);
    float* out = dx ? dx + from : block.data();
    for (size_t i = from; i < to; i++) {
      float v = x[i];
      float s = v > 0.f ? 1.f : 0.f;
      out[i - from] = dy[i] * (v != v ? v : s);
    }
    if (shadow) CastToBf16(out, shadow + from, to - from);
  }
  return info.Env().Undefined();
}

// addRowVector(x, v, y, rows, cols): y[r, c] = x[r, c] + v[c]
TANDEM_SIMD Napi::Value AddRowVector(const Napi::CallbackInfo& info) {
  size_t rows = Count(info[3]), cols = Count(info[4]);
  const float* x = F32(info[0], rows * cols, "x");
  const float* v = F32(info[1], cols, "v");
  float* y = F32(info[2], rows * cols, "y");
  for (size_t r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (size_t c = 0; c < cols; c++) yr[c] = xr[c] + v[c];
  }
  return info.Env().Undefined();
}

// sumRows(x, out, rows, cols): out[c] = x[0, c] + x[1, c] + ... in row order, from 0,
// accumulated in double and rounded once, as the JS loop of tfjs's Sum does.
TANDEM_SIMD Napi::Value SumRows(const Napi::CallbackInfo& info) {
  size_t rows = Count(info[2]), cols = Count(info[3]);
  const float* x = F32(info[0], rows * cols, "x");
  float* out = F32(info[1], cols, "out");
  std::vector<double> acc(cols, 0.0);
  for (size_t r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
    for (size_t c = 0; c < cols; c++) acc[c] += xr[c];
  }
  for (size_t c = 0; c < cols; c++) out[c] = static_cast<float>(acc[c]);
  return info.Env().Undefined();
}

}  // namespace

void RegisterEltwise(Napi::Env env, Napi::Object exports) {
  exports.Set("relu", Napi::Function::New(env, Relu));
  exports.Set("reluGrad", Napi::Function::New(env, ReluGrad));
  exports.Set("addRowVector", Napi::Function::New(env, AddRowVector));
  exports.Set("sumRows", Napi::Function::New(env, SumRows));
}

}  // namespace tandem

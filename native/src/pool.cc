// Max pooling on NHWC Float32Arrays, forward and gradient, with the tfjs cpu
// backend's semantics: padding cells never win, ties go to the first cell of
// the window (row-major), the gradient of a cell is the sum of the dy values
// of the windows it won, added in output order (bit-identical to tfjs).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "dnnl-context.h"

namespace tandem {
namespace {

struct PoolShape {
  int N, H, W, C, FH, FW, sh, sw, pt, pl, OH, OW;
};

PoolShape ReadPoolShape(const Napi::Value& v) {
  int s[12];
  ReadInts(v, 12, "pool shape = [N,H,W,C,filterH,filterW,strideH,strideW,padTop,padLeft,outH,outW]", s);
  PoolShape p{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11]};
  if (p.N < 1 || p.H < 1 || p.W < 1 || p.C < 1 || p.FH < 1 || p.FW < 1 || p.sh < 1 || p.sw < 1 || p.pt < 0 || p.pl < 0 ||
      p.OH < 1 || p.OW < 1)
    throw Napi::RangeError::New(v.Env(), "pool shape entries must be positive (pads non-negative)");
  return p;
}

// One window cell: keep the strictly greater value and where it was (vectorised: no aliasing).
inline void ScanCell(const float* __restrict px, float* __restrict best, int32_t* __restrict at, int32_t k, int channels) {
  for (int c = 0; c < channels; c++) {
    float v = px[c], b = best[c];
    int32_t a = at[c];
    int32_t gt = -static_cast<int32_t>(v > b);  // all ones where v wins
    best[c] = v > b ? v : b;
    at[c] = (k & gt) | (a & ~gt);
  }
}

// Calls visit(xn, cell, hs, ws, width, height) for every output cell after filling, per channel,
// best[c] = the window's maximum and at[c] = the index (h - hs) * (we - ws) + (w - ws)
// of the first cell holding it, found by a strict "greater than" scan from -inf:
// padding never wins, NaN never wins, a window of -inf has no winner (at = -1).
template <typename Visit>
void ForEachWindow(const PoolShape& p, const float* x, float* best, int32_t* at, Visit visit) {
  const float lowest = -std::numeric_limits<float>::infinity();
  for (int n = 0; n < p.N; n++) {
    const float* xn = x + (size_t)n * p.H * p.W * p.C;
    for (int oh = 0; oh < p.OH; oh++) {
      int h0 = oh * p.sh - p.pt;
      int hs = h0 < 0 ? 0 : h0, he = h0 + p.FH < p.H ? h0 + p.FH : p.H;
      for (int ow = 0; ow < p.OW; ow++) {
        int w0 = ow * p.sw - p.pl;
        int ws = w0 < 0 ? 0 : w0, we = w0 + p.FW < p.W ? w0 + p.FW : p.W;
        for (int c = 0; c < p.C; c++) {
          best[c] = lowest;
          at[c] = -1;
        }
        int32_t k = 0;
        for (int h = hs; h < he; h++)
          for (int w = ws; w < we; w++, k++) {
            ScanCell(xn + ((size_t)h * p.W + w) * p.C, best, at, k, p.C);
          }
        visit(xn, ((size_t)n * p.OH + oh) * p.OW + ow, hs, ws, we - ws, he - hs);
      }
    }
  }
}

// maxPool(x, y, shape): y = each window's maximum by the strict scan (no winner: -inf). Only the maximum is
// needed, so the window is reduced into y's row directly.
TANDEM_SIMD Napi::Value MaxPool(const Napi::CallbackInfo& info) {
  PoolShape p = ReadPoolShape(info[2]);
  const float* x = F32(info[0], (size_t)p.N * p.H * p.W * p.C, "x");
  float* y = F32(info[1], (size_t)p.N * p.OH * p.OW * p.C, "y");
  const float lowest = -std::numeric_limits<float>::infinity();
  for (int n = 0; n < p.N; n++) {
    const float* xn = x + (size_t)n * p.H * p.W * p.C;
    for (int oh = 0; oh < p.OH; oh++) {
      int h0 = oh * p.sh - p.pt;
      int hs = h0 < 0 ? 0 : h0, he = h0 + p.FH < p.H ? h0 + p.FH : p.H;
      for (int ow = 0; ow < p.OW; ow++) {
        int w0 = ow * p.sw - p.pl;
        int ws = w0 < 0 ? 0 : w0, we = w0 + p.FW < p.W ? w0 + p.FW : p.W;
        float* __restrict py = y + (((size_t)n * p.OH + oh) * p.OW + ow) * p.C;
        for (int c = 0; c < p.C; c++) py[c] = lowest;
        for (int h = hs; h < he; h++)
          for (int w = ws; w < we; w++) {
            const float* __restrict px = xn + ((size_t)h * p.W + w) * p.C;
            for (int c = 0; c < p.C; c++) py[c] = px[c] > py[c] ? px[c] : py[c];
          }
      }
    }
  }
  return info.Env().Undefined();
}

// relu's derivative as TandemReluGrad computes it: dy * (x > 0 ? 1 : 0), NaN where x is NaN.
inline float ReluStep(float x) { return x != x ? x : (x > 0.f ? 1.f : 0.f); }

// One cell of a window whose winners are at[]: dx = (the winner's dy or 0), times relu's step at x when kRelu.
template <bool kRelu>
inline void WriteCell(float* __restrict dx, const float* __restrict x, const float* __restrict dy,
                      const int32_t* __restrict at, int32_t k, int channels) {
  for (int c = 0; c < channels; c++) {
    // branch-free (the winner is a coin toss per channel): dy's bits where this cell won, +0 elsewhere
    uint32_t bits;
    std::memcpy(&bits, dy + c, 4);
    bits &= -static_cast<uint32_t>(at[c] == k);
    float g;
    std::memcpy(&g, &bits, 4);
    g += 0.f;  // tfjs sums from 0: a winner's -0 is +0
    if (kRelu) {
      float v = x[c];
      float step = v > 0.f ? 1.f : 0.f;
      g *= v != v ? v : step;
    }
    dx[c] = g;
  }
}

// maxPoolGrad(dy, x, dx, shape, reluOfX): each window adds its dy to its winner, windows in output order (the order
// tfjs sums them in); overlapping windows accumulate in double and round once, as tfjs's JS does. dx is written
// whole (any recycled contents). reluOfX: x is a relu's output, and dx is then also multiplied by relu's derivative
// at x, bit for bit what TandemReluGrad would make of this gradient: the relu's gradient in the same pass.
Napi::Value MaxPoolGrad(const Napi::CallbackInfo& info) {
  PoolShape p = ReadPoolShape(info[3]);
  const size_t xSize = (size_t)p.N * p.H * p.W * p.C;
  const float* dy = F32(info[0], (size_t)p.N * p.OH * p.OW * p.C, "dy");
  const float* x = F32(info[1], xSize, "x");
  float* dx = F32(info[2], xSize, "dx");
  const bool relu = info.Length() > 4 && info[4].ToBoolean().Value();
  std::vector<float> best(p.C);
  std::vector<int32_t> at(p.C);
  const bool overlapping = p.FH > p.sh || p.FW > p.sw;
  // windows that tile x exactly write every cell of dx; otherwise dx starts from zero (times the relu's step)
  const bool tiles = !overlapping && p.FH == p.sh && p.FW == p.sw && p.pt == 0 && p.pl == 0 && p.OH * p.sh == p.H &&
                     p.OW * p.sw == p.W;
  std::vector<double> acc(overlapping ? xSize : 0, 0.0);
  if (!overlapping && !tiles)
    for (size_t i = 0; i < xSize; i++) dx[i] = relu ? 0.f * ReluStep(x[i]) : 0.f;
  std::vector<size_t> offset((size_t)p.FH * p.FW);  // window cell k -> its first float in the image
  ForEachWindow(p, x, best.data(), at.data(), [&](const float* xn, size_t cell, int hs, int ws, int width, int height) {
    size_t base = xn - x;
    const float* pdy = dy + cell * p.C;
    const size_t cells = (size_t)width * height;  // the window inside x (padding clips it)
    for (size_t k = 0; k < cells; k++)  // a division per cell of the window, not per channel
      offset[k] = base + ((size_t)(hs + (int)k / width) * p.W + ws + (int)k % width) * p.C;
    if (overlapping) {
      for (int c = 0; c < p.C; c++)
        if (at[c] >= 0) acc[offset[at[c]] + c] += pdy[c];
      return;
    }
    // at most one window reaches a cell: write the window's cells whole
    for (size_t k = 0; k < cells; k++) {
      if (relu) WriteCell<true>(dx + offset[k], x + offset[k], pdy, at.data(), (int32_t)k, p.C);
      else WriteCell<false>(dx + offset[k], x + offset[k], pdy, at.data(), (int32_t)k, p.C);
    }
  });
  if (overlapping)
    for (size_t i = 0; i < acc.size(); i++)
      dx[i] = relu ? static_cast<float>(acc[i]) * ReluStep(x[i]) : static_cast<float>(acc[i]);
  return info.Env().Undefined();
}

}  // namespace

void RegisterPool(Napi::Env env, Napi::Object exports) {
  exports.Set("maxPool", Napi::Function::New(env, MaxPool));
  exports.Set("maxPoolGrad", Napi::Function::New(env, MaxPoolGrad));
}

}  // namespace tandem

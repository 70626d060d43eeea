// Max pooling on NHWC Float32Arrays, forward and gradient, with the tfjs cpu
// backend's semantics: padding cells never win, ties go to the first cell of
// the window (row-major), the gradient of a cell is the sum of the dy values
// of the windows it won, added in output order (bit-identical to tfjs).
#include <cmath>
#include <cstdint>
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

// Calls visit(xn, cell, hs, ws) for every output cell after filling, per channel,
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
        visit(xn, ((size_t)n * p.OH + oh) * p.OW + ow, hs, ws, we - ws);
      }
    }
  }
}

// maxPool(x, y, shape)
Napi::Value MaxPool(const Napi::CallbackInfo& info) {
  PoolShape p = ReadPoolShape(info[2]);
  const float* x = F32(info[0], (size_t)p.N * p.H * p.W * p.C, "x");
  float* y = F32(info[1], (size_t)p.N * p.OH * p.OW * p.C, "y");
  std::vector<float> best(p.C);
  std::vector<int32_t> at(p.C);
  ForEachWindow(p, x, best.data(), at.data(), [&](const float*, size_t cell, int, int, int) {
    float* py = y + cell * p.C;
    for (int c = 0; c < p.C; c++) py[c] = best[c];
  });
  return info.Env().Undefined();
}

// maxPoolGrad(dy, x, dx, shape): dx must be zero-filled; each window adds its
// dy to its winner, windows in output order (the order tfjs sums them in).
// Overlapping windows accumulate in double and round once, as tfjs's JS does.
Napi::Value MaxPoolGrad(const Napi::CallbackInfo& info) {
  PoolShape p = ReadPoolShape(info[3]);
  const float* dy = F32(info[0], (size_t)p.N * p.OH * p.OW * p.C, "dy");
  const float* x = F32(info[1], (size_t)p.N * p.H * p.W * p.C, "x");
  float* dx = F32(info[2], (size_t)p.N * p.H * p.W * p.C, "dx");
  std::vector<float> best(p.C);
  std::vector<int32_t> at(p.C);
  const bool overlapping = p.FH > p.sh || p.FW > p.sw;
  std::vector<double> acc(overlapping ? (size_t)p.N * p.H * p.W * p.C : 0, 0.0);
  std::vector<size_t> offset((size_t)p.FH * p.FW);  // window cell k -> its first float in the image
  ForEachWindow(p, x, best.data(), at.data(), [&](const float* xn, size_t cell, int hs, int ws, int width) {
    size_t base = xn - x;
    const float* pdy = dy + cell * p.C;
    for (size_t k = 0; k < offset.size(); k++)  // a division per cell of the window, not per channel
      offset[k] = base + ((size_t)(hs + (int)k / width) * p.W + ws + (int)k % width) * p.C;
    for (int c = 0; c < p.C; c++) {
      if (at[c] < 0) continue;
      size_t i = offset[at[c]] + c;
      if (overlapping) acc[i] += pdy[c];
      else dx[i] = pdy[c];  // at most one window reaches this cell
    }
  });
  if (overlapping)
    for (size_t i = 0; i < acc.size(); i++) dx[i] = static_cast<float>(acc[i]);
  return info.Env().Undefined();
}

}  // namespace

void RegisterPool(Napi::Env env, Napi::Object exports) {
  exports.Set("maxPool", Napi::Function::New(env, MaxPool));
  exports.Set("maxPoolGrad", Napi::Function::New(env, MaxPoolGrad));
}

}  // namespace tandem

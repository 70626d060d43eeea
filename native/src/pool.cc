// Max pooling on NHWC Float32Arrays, forward and gradient, with the tfjs cpu
// backend's semantics: padding cells never win, ties go to the first cell of
// the window (row-major), the gradient of a cell is the sum of the dy values
// of the windows it won, added in output order (bit-identical to tfjs).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <immintrin.h>

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

// Calls window(n, cell, hs, he, ws, we) for every output cell in order: its image, its index among the outputs,
// and the rows [hs, he) and columns [ws, we) of x its window covers (padding clips it).
template <typename Window>
void ForEachCell(const PoolShape& p, Window window) {
  for (int n = 0; n < p.N; n++)
    for (int oh = 0; oh < p.OH; oh++) {
      int h0 = oh * p.sh - p.pt;
      int hs = h0 < 0 ? 0 : h0, he = h0 + p.FH < p.H ? h0 + p.FH : p.H;
      for (int ow = 0; ow < p.OW; ow++) {
        int w0 = ow * p.sw - p.pl;
        int ws = w0 < 0 ? 0 : w0, we = w0 + p.FW < p.W ? w0 + p.FW : p.W;
        window(n, ((size_t)n * p.OH + oh) * p.OW + ow, hs, he, ws, we);
      }
    }
}

// Calls visit(xn, cell, hs, ws, width, height) for every output cell after filling, per channel,
// best[c] = the window's maximum and at[c] = the index (h - hs) * (we - ws) + (w - ws)
// of the first cell holding it, found by a strict "greater than" scan from -inf:
// padding never wins, NaN never wins, a window of -inf has no winner (at = -1).
template <typename Visit>
void ForEachWindow(const PoolShape& p, const float* x, float* best, int32_t* at, Visit visit) {
  const float lowest = -std::numeric_limits<float>::infinity();
  ForEachCell(p, [&](int n, size_t cell, int hs, int he, int ws, int we) {
    const float* xn = x + (size_t)n * p.H * p.W * p.C;
    for (int c = 0; c < p.C; c++) {
      best[c] = lowest;
      at[c] = -1;
    }
    int32_t k = 0;
    for (int h = hs; h < he; h++)
      for (int w = ws; w < we; w++, k++) ScanCell(xn + ((size_t)h * p.W + w) * p.C, best, at, k, p.C);
    visit(xn, cell, hs, ws, we - ws, he - hs);
  });
}

// maxPool(x, y, shape): y = each window's maximum by the strict scan (no winner: -inf). Only the maximum is
// needed, so the window is reduced into y's row directly.
TANDEM_SIMD Napi::Value MaxPool(const Napi::CallbackInfo& info) {
  PoolShape p = ReadPoolShape(info[2]);
  const float* x = F32(info[0], (size_t)p.N * p.H * p.W * p.C, "x");
  float* y = F32(info[1], (size_t)p.N * p.OH * p.OW * p.C, "y");
  const float lowest = -std::numeric_limits<float>::infinity();
  // ForEachCell's loops written out: a lambda is compiled for baseline x86-64 and not inlined into this function's
  // AVX-512 clone (measured: 0.18 -> 0.34 ms on a 32x32x32x32 input)
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

// The geometry in which the windows tile x exactly (no padding, no overlap, no gap): what the winners serve.
bool Tiles(const PoolShape& p) {
  return p.FH == p.sh && p.FW == p.sw && p.pt == 0 && p.pl == 0 && p.OH * p.sh == p.H && p.OW * p.sw == p.W;
}

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
    if (kRelu) {  // ReluStep written out: its form here vectorises, the call did not (measured 0.6 -> 6 ms)
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
  const bool tiles = Tiles(p);
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

int8_t* I8(const Napi::Value& v, size_t need, const char* name) {
  return TypedData<int8_t>(v, napi_int8_array, "Int8Array", need, name);
}

// One window of four cells (c0..c3 in scan order), per channel: the strict-scan maximum, the first cell holding
// it, kNoWinner for -inf, kHoldsNaN when a cell is NaN.
inline void WinnersOf4(const float* const* cells, float* __restrict y, int8_t* __restrict winners, int C) {
  const float lowest = -std::numeric_limits<float>::infinity();
  const float *__restrict a = cells[0], *__restrict b = cells[1], *__restrict c2 = cells[2], *__restrict d = cells[3];
  for (int c = 0; c < C; c++) {
    float m = a[c] > lowest ? a[c] : lowest;
    m = b[c] > m ? b[c] : m;
    m = c2[c] > m ? c2[c] : m;
    m = d[c] > m ? d[c] : m;
    int32_t w = a[c] == m ? 0 : b[c] == m ? 1 : c2[c] == m ? 2 : 3;
    const bool nan = a[c] != a[c] || b[c] != b[c] || c2[c] != c2[c] || d[c] != d[c];
    y[c] = m;
    winners[c] = static_cast<int8_t>(nan ? kHoldsNaN : m == lowest ? kNoWinner : w);
  }
}

// maxPoolWinners(x, y, winners, shape): MaxPool of windows that tile x (Tiles), and per window and channel the
// cell that won (k = dh·FW + dw, the first maximum by the strict scan), kNoWinner for a window of -inf, kHoldsNaN
// when the window holds a NaN (its gradient then reads x again). The gradient of a relu's max pool needs no scan.
TANDEM_SIMD Napi::Value MaxPoolWinners(const Napi::CallbackInfo& info) {
  PoolShape p = ReadPoolShape(info[3]);
  if (!Tiles(p) || p.FH * p.FW > 120) throw Napi::RangeError::New(info.Env(), "maxPoolWinners: windows must tile x");
  const size_t ySize = (size_t)p.N * p.OH * p.OW * p.C;
  const float* x = F32(info[0], (size_t)p.N * p.H * p.W * p.C, "x");
  float* y = F32(info[1], ySize, "y");
  int8_t* winners = I8(info[2], ySize, "winners");
  const float lowest = -std::numeric_limits<float>::infinity();
  const int K = p.FH * p.FW, C = p.C;
  std::vector<int32_t> wv(C), nv(C);
  std::vector<const float*> cells(K);
  for (int n = 0; n < p.N; n++)
    for (int oh = 0; oh < p.OH; oh++)
      for (int ow = 0; ow < p.OW; ow++) {
        for (int k = 0; k < K; k++)
          cells[k] = x + (((size_t)n * p.H + oh * p.FH + k / p.FW) * p.W + ow * p.FW + k % p.FW) * C;
        const size_t cell = ((size_t)n * p.OH + oh) * p.OW + ow;
        float* __restrict py = y + cell * C;
        if (K == 4) {  // 1×4 or 4×1 (2×2 took the path above): one pass, the window in registers
          WinnersOf4(cells.data(), py, winners + cell * C, C);
          continue;
        }
        int32_t* __restrict w = wv.data();
        int32_t* __restrict nan = nv.data();
        for (int c = 0; c < C; c++) py[c] = lowest, w[c] = -1, nan[c] = 0;
        for (int k = 0; k < K; k++) {  // the maximum by the strict scan: NaN never wins
          const float* __restrict px = cells[k];
          for (int c = 0; c < C; c++) py[c] = px[c] > py[c] ? px[c] : py[c];
        }
        for (int k = K - 1; k >= 0; k--) {  // the first cell holding it; a NaN anywhere flags the window
          const float* __restrict px = cells[k];
          for (int c = 0; c < C; c++) {
            w[c] = px[c] == py[c] ? k : w[c];
            nan[c] |= px[c] != px[c];
          }
        }
        int8_t* pw = winners + cell * C;
        for (int c = 0; c < C; c++)  // a window of -inf has no winner
          pw[c] = static_cast<int8_t>(nan[c] ? kHoldsNaN : py[c] == lowest ? kNoWinner : w[c]);
      }
  return info.Env().Undefined();
}

// maxPoolReluGradWinners(dy, x | null, y, winners, dx | null, shape, dxShadow?): what maxPoolGrad(dy, x, dx, shape,
// true) gives, from the winners maxPoolWinners recorded: the winner's dx = (dy + 0)·step(y) (y is the winner's x),
// every other cell +0 (0·step(x) for a finite x); a window holding a NaN is scanned again from x (without x: NaN). dx
// written whole; dxShadow (a Uint16Array) too, in bf16, when given; with dxShadow and dx null, in bf16 alone.
// Non-temporal stores of a float32 output nothing reads soon (the convolutions read its bf16 shadow): no read of each
// line before it is written, and the caches keep what the next kernels read. alexnet-mini's three pool gradients in
// bf16: 1.20 -> 0.76 ms, its forward and backward 8.83 -> 8.13 ms (three alternating pairs). AVX-512 only, on 64-byte
// aligned rows of whole vectors (the output pool aligns its arrays); StoreFence() after the last.
bool CanStream(const float* dx, int C) {
  return StreamsAvx512() && reinterpret_cast<uintptr_t>(dx) % 64 == 0 && C % 16 == 0;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void StreamSelected(float* dst, const float* g, const int8_t* w, int8_t k, int C) {
  const __m128i kk = _mm_set1_epi8(k);
  for (int c = 0; c < C; c += 16) {
    const __mmask16 m = _mm_cmpeq_epi8_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c)), kk);
    _mm512_stream_ps(dst + c, _mm512_maskz_mov_ps(m, _mm512_loadu_ps(g + c)));
  }
}

// One pooled cell's gradient in bf16 alone (dx null), C a multiple of 16, on AVX-512 with AVX512-BF16: g = (dy + 0) ·
// step(y), rounded by the instruction the casts use (Bf16Of's bits), written to each window cell k where the winner is
// k, 0 elsewhere. The same arithmetic as the loop in MaxPoolReluGradWinners, sixteen channels at a time. Returns
// whether a window of the cell holds a NaN (its cells are written again after).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) bool CellGradientBf16x16(
    const float* dy, const float* y, const int8_t* winners, uint16_t* dxBits, const size_t* windowAt, int K, int C) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f);
  __mmask16 flagged = 0;
  for (int c = 0; c < C; c += 16) {
    const __m512 vy = _mm512_loadu_ps(y + c);
    __m512 step = _mm512_mask_mov_ps(zero, _mm512_cmp_ps_mask(vy, zero, _CMP_GT_OQ), one);  // ReluStep
    step = _mm512_mask_mov_ps(step, _mm512_cmp_ps_mask(vy, vy, _CMP_UNORD_Q), vy);
    const __m512 g = _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(dy + c), zero), step);
    const __m256i bits = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(g));
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(winners + c));
    flagged |= _mm_cmpeq_epi8_mask(w, _mm_set1_epi8(kHoldsNaN));
    for (int k = 0; k < K; k++) {
      const __mmask16 mine = _mm_cmpeq_epi8_mask(w, _mm_set1_epi8(static_cast<char>(k)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dxBits + windowAt[k] + c), _mm256_maskz_mov_epi16(mine, bits));
    }
  }
  return flagged != 0;
}

// One pooled cell's gradient channel by channel (CellGradientBf16x16's arithmetic): g = (dy + 0)·step(y) to the window
// cell its winner names, +0 to the others, into dx (streamed where it can) and dxBits (in bf16) as given; pg and pgb
// hold the cell's g. Returns whether a window of the cell holds a NaN. Always inlined: its loops are vectorised in the
// calling kernel's clone.
__attribute__((always_inline)) inline bool CellGradient(const float* pdy, const float* py, const int8_t* __restrict pw,
                                                        float* dx, uint16_t* dxBits, const size_t* windowAt, int K,
                                                        int C, bool streamDx, float* __restrict pg,
                                                        uint16_t* __restrict pgb) {
  int flagged = 0;
  for (int c = 0; c < C; c++) {
    pg[c] = (pdy[c] + 0.f) * ReluStep(py[c]);
    flagged |= pw[c] == kHoldsNaN;
  }
  if (dxBits)
    for (int c = 0; c < C; c++) pgb[c] = Bf16Of(pg[c]);
  for (int k = 0; k < K; k++) {
    if (streamDx) {
      StreamSelected(dx + windowAt[k], pg, pw, static_cast<int8_t>(k), C);
    } else if (dx) {
      float* __restrict pdx = dx + windowAt[k];
      for (int c = 0; c < C; c++) pdx[c] = pw[c] == k ? pg[c] : 0.f;
    }
    if (!dxBits) continue;
    uint16_t* __restrict pdb = dxBits + windowAt[k];
    for (int c = 0; c < C; c++) pdb[c] = pw[c] == k ? pgb[c] : 0;
  }
  return flagged != 0;
}

TANDEM_SIMD Napi::Value MaxPoolReluGradWinners(const Napi::CallbackInfo& info) {
  PoolShape p = ReadPoolShape(info[5]);
  if (!Tiles(p)) throw Napi::RangeError::New(info.Env(), "maxPoolReluGradWinners: windows must tile x");
  const size_t ySize = (size_t)p.N * p.OH * p.OW * p.C;
  const float* dy = F32(info[0], ySize, "dy");
  const float* x = OptionalF32(info[1], (size_t)p.N * p.H * p.W * p.C, "x");
  const float* y = F32(info[2], ySize, "y");
  const int8_t* winners = I8(info[3], ySize, "winners");
  // dxShadow (optional): dx in bf16 too, in the same pass (each window's value rounded once); dx null: in bf16 alone
  uint16_t* dxBits = OptionalShadowOut(info, 6, (size_t)p.N * p.H * p.W * p.C);
  float* dx = dxBits ? OptionalF32(info[4], (size_t)p.N * p.H * p.W * p.C, "dx")
                     : F32(info[4], (size_t)p.N * p.H * p.W * p.C, "dx");
  const int K = p.FH * p.FW;
  std::vector<float> g(p.C);
  std::vector<uint16_t> gb(p.C);
  // with a shadow, the convolution's gradients read dx in bf16: its float32 values are streamed past the caches
  const bool streamDx = dx && dxBits && CanStream(dx, p.C);
  // in bf16 alone, sixteen channels at a time where the CPU can
  const bool vectorBits = !dx && p.C % 16 == 0 && K <= 64 && CastsByInstruction();
  std::vector<size_t> windowAt(K);  // where the pooled cell's window cell k starts (its channel 0)
  for (int n = 0; n < p.N; n++)
    for (int oh = 0; oh < p.OH; oh++)
      for (int ow = 0; ow < p.OW; ow++) {
        for (int dh = 0, k = 0; dh < p.FH; dh++)
          for (int dw = 0; dw < p.FW; dw++, k++)
            windowAt[k] = (((size_t)n * p.H + oh * p.FH + dh) * p.W + ow * p.FW + dw) * p.C;
        const size_t cell = ((size_t)n * p.OH + oh) * p.OW + ow;
        const float *pdy = dy + cell * p.C, *py = y + cell * p.C;
        const int8_t* pw = winners + cell * p.C;
        const bool flagged =
            vectorBits ? CellGradientBf16x16(pdy, py, pw, dxBits, windowAt.data(), K, p.C)
                       : CellGradient(pdy, py, pw, dx, dxBits, windowAt.data(), K, p.C, streamDx, g.data(), gb.data());
        if (!flagged) continue;
        if (streamDx) StoreFence();  // the streamed cells first, then these rewrites of some of them
        for (int c = 0; c < p.C; c++) {  // a window with a NaN: the scan and relu's step again, from x
          if (pw[c] != kHoldsNaN) continue;
          float best = -std::numeric_limits<float>::infinity();
          int win = -1;
          for (int k = 0; x && k < K; k++)
            if (x[windowAt[k] + c] > best) best = x[windowAt[k] + c], win = k;
          for (int k = 0; k < K; k++) {
            const size_t at = windowAt[k] + c;
            // x not kept (conv2dReluMaxPool): the window's gradient is NaN, as its loss is
            const float v =
                x ? (k == win ? pdy[c] + 0.f : 0.f) * ReluStep(x[at]) : std::numeric_limits<float>::quiet_NaN();
            if (dx) dx[at] = v;
            if (dxBits) dxBits[at] = Bf16Of(v);
          }
        }
      }
  if (streamDx) StoreFence();
  return info.Env().Undefined();
}

}  // namespace

void RegisterPool(Napi::Env env, Napi::Object exports) {
  exports.Set("maxPool", Napi::Function::New(env, MaxPool));
  exports.Set("maxPoolGrad", Napi::Function::New(env, MaxPoolGrad));
  exports.Set("maxPoolWinners", Napi::Function::New(env, MaxPoolWinners));
  exports.Set("maxPoolReluGradWinners", Napi::Function::New(env, MaxPoolReluGradWinners));
}

}  // namespace tandem

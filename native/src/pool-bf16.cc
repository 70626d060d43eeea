// The 2×2 (any tiling) max pool over a bf16 convolution's output, relu folded in (conv2dReluMaxPool in conv.cc):
// pooled values, their bf16 bits and each window's winner, as maxPoolWinners (pool.cc) records them. An AVX-512 path
// takes sixteen channels at a time where C allows; test/pool-winners-bf16.test.ts writes the results out.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <immintrin.h>

#include "dnnl-context.h"

namespace tandem {
namespace {

// The pooled value of relu'd cells from the strict-scan maximum m of the raw ones and how many were NaN (of K): what
// a strict scan of relu(cell) gives — relu keeps NaN, which never wins: all NaN is -inf; else max(m, 0).
inline float ReluOfMax(float m, int nans, int K) {
  return nans == K ? -std::numeric_limits<float>::infinity() : m > 0.f ? m : 0.f;
}

inline uint16_t Bf16Bits(float v) {  // v is a bf16 value (or +-inf, 0): its high half
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}

// The 2×2 (any 4-cell) window of raw bf16 cells: y = the maximum of their relus, its bits, and the winner as
// maxPoolWinners records it for relu'd cells (a window whose maximum is 0 gets no gradient: its winner is moot).
inline void WinnersOf4Bf16(const uint16_t* const* cells, float* __restrict y, uint16_t* __restrict yBits,
                           int8_t* __restrict winners, int C) {
  const float lowest = -std::numeric_limits<float>::infinity();
  const uint16_t *__restrict a = cells[0], *__restrict b = cells[1], *__restrict c2 = cells[2], *__restrict d = cells[3];
#pragma GCC ivdep
  for (int c = 0; c < C; c++) {
    const float va = Widened(a[c]), vb = Widened(b[c]), vc = Widened(c2[c]), vd = Widened(d[c]);
    float m = va > lowest ? va : lowest;
    m = vb > m ? vb : m;
    m = vc > m ? vc : m;
    m = vd > m ? vd : m;
    const int32_t w = va == m ? 0 : vb == m ? 1 : vc == m ? 2 : 3;
    const int nans = (va != va) + (vb != vb) + (vc != vc) + (vd != vd);
    const float r = ReluOfMax(m, nans, 4);
    y[c] = r;
    yBits[c] = Bf16Bits(r);
    winners[c] = static_cast<int8_t>(nans > 0 ? kHoldsNaN : r == lowest ? kNoWinner : w);
  }
}

// WinnersOf4Bf16 for C a multiple of 16, sixteen channels an iteration in AVX-512 registers: the same comparisons in
// the same order, so the same values, bits and winners. GCC's vectorisation of the loop above (bf16 in, float32, bf16
// and int8 out) spilled its mask registers to the stack: alexnet-mini's three pools took 0.69 ms a step.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 Widen16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void WinnersOf4Bf16x16(const uint16_t* const* cells,
                                                                             float* __restrict y,
                                                                             uint16_t* __restrict yBits,
                                                                             int8_t* __restrict winners, int C) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity()), zero = _mm512_setzero_ps();
  for (int c = 0; c < C; c += 16) {
    const __m512 va = Widen16(cells[0] + c), vb = Widen16(cells[1] + c), vc = Widen16(cells[2] + c),
                 vd = Widen16(cells[3] + c);
    __m512 m = _mm512_mask_mov_ps(lowest, _mm512_cmp_ps_mask(va, lowest, _CMP_GT_OQ), va);  // NaN never wins
    m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(vb, m, _CMP_GT_OQ), vb);
    m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(vc, m, _CMP_GT_OQ), vc);
    m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(vd, m, _CMP_GT_OQ), vd);
    __m128i w = _mm_set1_epi8(3);  // the first cell holding m
    w = _mm_mask_mov_epi8(w, _mm512_cmp_ps_mask(vc, m, _CMP_EQ_OQ), _mm_set1_epi8(2));
    w = _mm_mask_mov_epi8(w, _mm512_cmp_ps_mask(vb, m, _CMP_EQ_OQ), _mm_set1_epi8(1));
    w = _mm_mask_mov_epi8(w, _mm512_cmp_ps_mask(va, m, _CMP_EQ_OQ), _mm_setzero_si128());
    const __mmask16 na = _mm512_cmp_ps_mask(va, va, _CMP_UNORD_Q), nb = _mm512_cmp_ps_mask(vb, vb, _CMP_UNORD_Q),
                    nc = _mm512_cmp_ps_mask(vc, vc, _CMP_UNORD_Q), nd = _mm512_cmp_ps_mask(vd, vd, _CMP_UNORD_Q);
    const __mmask16 anyNan = na | nb | nc | nd, allNan = na & nb & nc & nd;
    __m512 r = _mm512_mask_mov_ps(zero, _mm512_cmp_ps_mask(m, zero, _CMP_GT_OQ), m);  // ReluOfMax
    r = _mm512_mask_mov_ps(r, allNan, lowest);
    _mm512_storeu_ps(y + c, r);
    const __m256i high = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(r), 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(yBits + c), high);
    w = _mm_mask_mov_epi8(w, _mm512_cmp_ps_mask(r, lowest, _CMP_EQ_OQ), _mm_set1_epi8(kNoWinner));
    w = _mm_mask_mov_epi8(w, anyNan, _mm_set1_epi8(kHoldsNaN));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(winners + c), w);
  }
}

// The 4-cell window kernel for this C: AVX-512 sixteen channels at a time where it can, else the plain loop.
inline void Winners4(const uint16_t* const* cells, float* y, uint16_t* yBits, int8_t* winners, int C) {
  if (C % 16 == 0 && StreamsAvx512())
    WinnersOf4Bf16x16(cells, y, yBits, winners, C);
  else
    WinnersOf4Bf16(cells, y, yBits, winners, C);
}

}  // namespace

// maxPoolWinners of relu(x) for raw bf16 x (widened: exact), relu folded in: the pooled values, their bf16 bits and
// the winners (for a window holding a NaN, kHoldsNaN: its gradient is NaN, as its cells' are).
TANDEM_SIMD void MaxPoolWinnersBf16(const uint16_t* x, float* y, uint16_t* yBits, int8_t* winners,
                                    const TiledPool& p) {
  const int OH = p.H / p.FH, OW = p.W / p.FW, K = p.FH * p.FW, C = p.C;
  if (p.FH == 2 && p.FW == 2) {  // the common window: its cells' addresses by steps, not divisions
    const size_t rowCells = (size_t)p.W * C;
    for (int n = 0; n < p.N; n++)
      for (int oh = 0; oh < OH; oh++) {
        const uint16_t* top = x + ((size_t)n * p.H + 2 * oh) * rowCells;
        const size_t first = ((size_t)n * OH + oh) * OW * C;
        for (int ow = 0; ow < OW; ow++) {
          const uint16_t* window[4] = {top + 2 * ow * C, top + (2 * ow + 1) * C, top + rowCells + 2 * ow * C,
                                       top + rowCells + (2 * ow + 1) * C};
          const size_t at = first + (size_t)ow * C;
          Winners4(window, y + at, yBits + at, winners + at, C);
        }
      }
    return;
  }
  const float lowest = -std::numeric_limits<float>::infinity();
  std::vector<int32_t> wv(C), nv(C);
  std::vector<const uint16_t*> cells(K);
  for (int n = 0; n < p.N; n++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++) {
        for (int k = 0; k < K; k++)
          cells[k] = x + (((size_t)n * p.H + oh * p.FH + k / p.FW) * p.W + ow * p.FW + k % p.FW) * C;
        const size_t cell = ((size_t)n * OH + oh) * OW + ow;
        float* __restrict py = y + cell * C;
        if (K == 4) {  // 1×4 or 4×1 (2×2 took the path above): one pass, the window in registers
          Winners4(cells.data(), py, yBits + cell * C, winners + cell * C, C);
          continue;
        }
        int32_t* __restrict w = wv.data();
        int32_t* __restrict nan = nv.data();  // how many cells of the window are NaN
        for (int c = 0; c < C; c++) py[c] = lowest, w[c] = -1, nan[c] = 0;
        for (int k = 0; k < K; k++) {  // the maximum by the strict scan: NaN never wins
          const uint16_t* __restrict px = cells[k];
          for (int c = 0; c < C; c++) {
            const float v = Widened(px[c]);
            py[c] = v > py[c] ? v : py[c];
          }
        }
        for (int k = K - 1; k >= 0; k--) {  // the first cell holding it; a NaN anywhere flags the window
          const uint16_t* __restrict px = cells[k];
          for (int c = 0; c < C; c++) {
            const float v = Widened(px[c]);
            w[c] = v == py[c] ? k : w[c];
            nan[c] += v != v;
          }
        }
        int8_t* __restrict pw = winners + cell * C;
        uint16_t* __restrict pb = yBits + cell * C;
        for (int c = 0; c < C; c++) {
          py[c] = ReluOfMax(py[c], nan[c], K);
          pb[c] = Bf16Bits(py[c]);
          pw[c] = static_cast<int8_t>(nan[c] > 0 ? kHoldsNaN : py[c] == lowest ? kNoWinner : w[c]);
        }
      }
}

}  // namespace tandem

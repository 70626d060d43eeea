// The bf16 weight gradient of a convolution with one to three input channels (a first layer's grey or RGB images) as
// im2col and oneDNN matmuls, a chunk of images at a time:
//
//   cols[k][p] = x[n, oh·sh + kh - pt, ow·sw + kw - pl, ci]   (0 in the padding), k = (kh·KW + kw)·C + ci, p = (n, oh, ow)
//   [dw; db] = Σ over chunks of [cols; 1] · dy                  ([K + 1, P] · [P, OC], bf16 products, float32 sums)
//
// dw's rows come out in tfjs's HWIO order; a row of ones gives the bias gradient. Each chunk's columns (~4,096
// pixels) are built just before its matmul reads them, so they are read from this core's cache. In a training step
// oneDNN 2.6's AMX convolution took 0.69 ms for alexnet-mini's first layer (32×32×3 → 32, batch 32), these 0.46 ms;
// called alone, with its inputs in cache, it is as fast as these (0.35 ms), and at 4 or more channels faster: hence
// the rule. The same products and float32 accumulation as the convolution's, summed in another order, within the
// bound test/native-bf16.test.ts checks. Chosen by the shape and the CPU (where oneDNN picked AMX for the matmul:
// RequireAmx), so every replica on this kind of CPU takes this path.
#include <algorithm>
#include <cstring>

#include "conv-shape.h"
#include "dnnl-context.h"

namespace tandem {

namespace {

constexpr uint16_t kOneBf16 = 0x3f80;
constexpr size_t kChunkPixels = 4096;

size_t Rows(const ConvShape& s) { return (size_t)s.KH * s.KW * s.C; }
size_t PaddedH(const ConvShape& s) { return (size_t)s.H + s.pt + s.pb; }
size_t PaddedW(const ConvShape& s) { return (size_t)s.W + s.pl + s.pr; }

// Whole images per chunk: ~kChunkPixels output pixels, at least one image.
int ChunkImages(const ConvShape& s) {
  const size_t b = kChunkPixels / ((size_t)s.OH * s.OW);
  return b < 1 ? 1 : b > (size_t)s.N ? s.N : (int)b;
}

// planar[ci][n][pt + h][pl + w] = x[n][h][w][ci] in bf16: from its shadow when filled, else rounded here (Bf16Of,
// the cast's rounding). The padding was zeroed when the entry was made and is never written.
TANDEM_SIMD void FillPlanar(ConvEntry& e, const ConvShape& s, const float* x, const Shadow& xs) {
  const size_t Hp = PaddedH(s), Wp = PaddedW(s), plane = (size_t)s.N * Hp * Wp;
  const uint16_t* bits = xs.filled ? xs.bits : nullptr;
  for (int n = 0; n < s.N; n++)
    for (int h = 0; h < s.H; h++) {
      uint16_t* dst = e.planar.data() + ((size_t)n * Hp + s.pt + h) * Wp + s.pl;
      const size_t at = ((size_t)n * s.H + h) * s.W * s.C;
      for (int ci = 0; ci < s.C; ci++, dst += plane)
        if (bits)
          for (int w = 0; w < s.W; w++) dst[w] = bits[at + (size_t)w * s.C + ci];
        else
          for (int w = 0; w < s.W; w++) dst[w] = Bf16Of(x[at + (size_t)w * s.C + ci]);
    }
}

// The columns of images [n0, n0 + images), rows of `pixels` cells: each (n, oh) of a row is OW cells of one padded
// plane's row (contiguous at stride 1); then the row of ones, with a bias.
void FillColumns(ConvEntry& e, const ConvShape& s, int n0, int images, bool bias) {
  const size_t Hp = PaddedH(s), Wp = PaddedW(s), pixels = (size_t)images * s.OH * s.OW;
  auto* row = static_cast<uint16_t*>(e.cols.get_data_handle());
  for (int kh = 0; kh < s.KH; kh++)
    for (int kw = 0; kw < s.KW; kw++)
      for (int ci = 0; ci < s.C; ci++)
        for (int n = n0; n < n0 + images; n++)
          for (int oh = 0; oh < s.OH; oh++, row += s.OW) {
            const uint16_t* src = e.planar.data() + ((ci * (size_t)s.N + n) * Hp + (size_t)oh * s.sh + kh) * Wp + kw;
            if (s.sw == 1) std::memcpy(row, src, s.OW * sizeof(uint16_t));
            else for (int ow = 0; ow < s.OW; ow++) row[ow] = src[(size_t)ow * s.sw];
          }
  if (bias) std::fill(row, row + pixels, kOneBf16);
}

// [K (+ 1), pixels] · [pixels, OC] added into the float32 output (a sum post-op: the chunks accumulate).
dnnl::matmul::primitive_desc ChunkPd(Ctx& c, const ConvShape& s, bool bias, int images) {
  const memory::dim K = Rows(s) + (bias ? 1 : 0), P = (memory::dim)images * s.OH * s.OW, OC = s.OC;
  memory::desc colsMd({K, P}, dt::bf16, tag::ab), dyMd({P, OC}, dt::bf16, tag::ab), dstMd({K, OC}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops sum;
  sum.append_sum(1.f);
  attr.set_post_ops(sum);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(colsMd, dyMd, dstMd), attr, c.eng);
}

}  // namespace

bool WeightsByIm2col(const ConvShape& s) { return s.G == 1 && s.C <= 3 && Rows(s) <= 27; }

void CreateIm2colWeights(Ctx& c, ConvEntry& e, const ConvShape& s, bool bias) {
  const int images = ChunkImages(s), tail = s.N % images;
  auto pd = ChunkPd(c, s, bias, images);
  RequireAmx(pd.impl_info_str());
  e.prim = dnnl::matmul(pd);
  memory::desc scratch = pd.scratchpad_desc();
  if (tail) {
    auto tailPd = ChunkPd(c, s, bias, tail);
    e.tailPrim = dnnl::matmul(tailPd);
    if (tailPd.scratchpad_desc().get_size() > scratch.get_size()) scratch = tailPd.scratchpad_desc();
  }
  const memory::dim P = (memory::dim)s.N * s.OH * s.OW;
  e.y.Init(c, memory::desc({P, s.OC}, dt::f32, tag::ab), memory::desc({P, s.OC}, dt::bf16, tag::ab), true);
  e.cols = memory(pd.src_desc(), c.eng);
  e.dst = memory(pd.dst_desc(), c.eng);
  e.scratch = memory(scratch, c.eng);
  e.planar.assign((size_t)s.C * s.N * PaddedH(s) * PaddedW(s), 0);
  e.im2col = true;
  e.impl = std::string("im2col+") + pd.impl_info_str();
}

void RunIm2colWeights(Ctx& c, ConvEntry& e, const ConvShape& s, const float* x, Shadow& xs, float* dy, Shadow& dys,
                      float* dw, float* db) {
  FillPlanar(e, s, x, xs);
  const auto* dyBits = static_cast<const uint16_t*>(e.y.Input(c, dy, dys).get_data_handle());
  const memory::dim K = Rows(s) + (db ? 1 : 0);
  std::memset(e.dst.get_data_handle(), 0, e.dst.get_desc().get_size());
  const int images = ChunkImages(s);
  for (int n0 = 0; n0 < s.N; n0 += images) {
    const int count = n0 + images <= s.N ? images : s.N - n0;
    const memory::dim pixels = (memory::dim)count * s.OH * s.OW;
    FillColumns(e, s, n0, count, db != nullptr);
    memory cols(memory::desc({K, pixels}, dt::bf16, tag::ab), c.eng, e.cols.get_data_handle());
    memory dyChunk(memory::desc({pixels, s.OC}, dt::bf16, tag::ab), c.eng,
                   const_cast<uint16_t*>(dyBits) + (size_t)n0 * s.OH * s.OW * s.OC);
    (count == images ? e.prim : e.tailPrim)
        .execute(c.strm, {{DNNL_ARG_SRC, cols}, {DNNL_ARG_WEIGHTS, dyChunk}, {DNNL_ARG_DST, e.dst},
                          {DNNL_ARG_SCRATCHPAD, e.scratch}});
  }
  c.strm.wait();
  const auto* out = static_cast<const float*>(e.dst.get_data_handle());
  std::memcpy(dw, out, Rows(s) * s.OC * sizeof(float));
  if (db) std::memcpy(db, out + Rows(s) * s.OC, s.OC * sizeof(float));
}

}  // namespace tandem

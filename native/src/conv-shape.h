// A 2-D convolution's geometry as JS passes it (src/engine/native/conv-kernels.ts's convShape), shared by conv.cc and
// conv-im2col.cc.
#pragma once
#include <cstddef>
#include <string>

namespace tandem {

struct ConvShape {
  int N, H, W, C, KH, KW, OC, sh, sw, pt, pl, pb, pr, OH, OW, G;
  size_t xSize() const { return (size_t)N * H * W * C; }
  size_t ySize() const { return (size_t)N * OH * OW * OC; }
  size_t wSize() const { return (size_t)KH * KW * (C / G) * OC; }
};

struct Ctx;
struct ConvEntry;
struct Shadow;

// Whether a bf16 weight gradient of shape s runs as im2col and one matmul (conv-im2col.cc): few input channels.
bool WeightsByIm2col(const ConvShape& s);
// Creates that matmul and its buffers into e (throws dnnl::error when oneDNN has no bf16 matmul).
void CreateIm2colWeights(Ctx& c, ConvEntry& e, const ConvShape& s, bool bias);
// dw (HWIO) and db (or null) of x and dy; the shadows read when filled (and filled when given).
void RunIm2colWeights(Ctx& c, ConvEntry& e, const ConvShape& s, const float* x, Shadow& xs, float* dy, Shadow& dys,
                      float* dw, float* db);

// Whether a bf16 input gradient runs as a forward convolution of the turned filter (conv-reversed.cc): stride 1, no
// groups, "same" output or SmallValid3x3.
bool ByReversedForward(const ConvShape& s);
// A 3×3 convolution at stride 1, "valid" padding, no groups, 32 or more channels in and out, an output up to 10×10:
// oneDNN 2.6's AMX gradient kernels are slow on these, so both gradients take another path (conv.cc, conv-reversed.cc).
bool SmallValid3x3(const ConvShape& s);
// Creates that forward into e (throws dnnl::error when oneDNN has no bf16 forward for it).
void CreateReversedData(Ctx& c, ConvEntry& e, const ConvShape& s);
// The frame, the reversed forward and im2col exist because of oneDNN 2.6's AMX kernels; on AVX512-BF16 alone they
// were no faster or slower (conv-reversed.cc). Throws dnnl::error unless impl (the primitive oneDNN picked for one of
// them) is an AMX kernel or TANDEM_BF16_AMX_PATHS is "always" (the kernel tests check the paths on any bf16 CPU so).
void RequireAmx(const std::string& impl);
// turned = w turned 180° with its channels swapped (HWIO, OC in, C out): the reversed forward's filter.
void TurnFilter(const ConvShape& s, const float* w, float* turned);

}  // namespace tandem

// A bf16 input gradient at stride 1 as a forward convolution of the turned filter: the rule, the primitive and the
// filter's turn (conv.cc's GetConv and Conv2dBackwardData use them); and the small "valid" shapes conv.cc's weight
// gradient frames.
#include <cstdlib>
#include <cstring>

#include "conv-shape.h"
#include "dnnl-context.h"

namespace tandem {

// Whether a bf16 input gradient runs as a forward convolution: stride 1, no groups, the output the input's size
// ("same"). dx is then dy convolved with the filter turned 180° and its channels swapped, padded by KH-1-pt above and
// KH-1-pb below (likewise across): the same bf16 products summed in float32 in another order. oneDNN 2.6 runs that
// forward on its brgemm AMX kernel where its backward-data kernel is older (one thread, 32 images: 32→64 channels at
// 16×16, 0.33 → 0.20 ms; 16 at 32×32, 0.21 → 0.15). At "valid" padding (dy padded by KH-1 all round) only on small
// outputs (SmallValid3x3: 64→64 at 10×10 0.23 → 0.18 ms, 32→64 at 12×12 0.16 → 0.13; 32→32 at 26×26 0.35 → 0.36).
// Chosen by the shape and the CPU (RequireAmx), so every replica on this kind of CPU takes the same path.
bool ByReversedForward(const ConvShape& s) {
  const bool same = s.pt + s.pb == s.KH - 1 && s.pl + s.pr == s.KW - 1;
  return s.G == 1 && s.sh == 1 && s.sw == 1 && (same || SmallValid3x3(s));
}

bool SmallValid3x3(const ConvShape& s) {
  return s.G == 1 && s.sh == 1 && s.sw == 1 && s.pt + s.pl + s.pb + s.pr == 0 && s.KH == 3 && s.KW == 3 &&
         s.C >= 32 && s.OC >= 32 && s.OH <= 10 && s.OW <= 10;
}

void CreateReversedData(Ctx& c, ConvEntry& e, const ConvShape& s) {
  memory::desc dy({s.N, s.OC, s.OH, s.OW}, dt::bf16, tag::nhwc), dx({s.N, s.C, s.H, s.W}, dt::f32, tag::nhwc);
  memory::desc wAny({s.C, s.OC, s.KH, s.KW}, dt::bf16, tag::any);
  memory::dims padL{s.KH - 1 - s.pt, s.KW - 1 - s.pl}, padR{s.KH - 1 - s.pb, s.KW - 1 - s.pr};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto d = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                           dy, wAny, dx, memory::dims{1, 1}, padL, padR);
  dnnl::convolution_forward::primitive_desc pd(d, attr, c.eng);
  RequireAmx(pd.impl_info_str());
  e.prim = dnnl::convolution_forward(pd);
  e.y.Init(c, e.y_md, pd.src_desc(), true);
  e.w.Init(c, memory::desc({s.C, s.OC, s.KH, s.KW}, dt::f32, tag::hwio), pd.weights_desc(), true);
  e.x.Init(c, e.x_md, pd.dst_desc(), false);
  e.scratch = memory(pd.scratchpad_desc(), c.eng);
  e.turned.resize(s.wSize());
  e.reversed = true;
  e.impl = std::string("reversed forward+") + pd.impl_info_str();
}

// On AMD EPYC (Zen 5, AVX512-BF16, no AMX; one thread, 32 images, each kernel alone) oneDNN 2.6's kernels gave, the
// path's against oneDNN's own: reversed input gradients 64→64 at 10×10 "valid" 0.69 against 0.59 ms, 32→32 at 16×16
// 0.38 against 0.35, 32→64 at 16×16 0.73 against 0.72; im2col weight gradients 3→32 at 32×32 0.40 against 0.34,
// 1→32 at 28×28 0.18 against 0.14; framed 64→64 at 10×10 1.07 against 0.83.
void RequireAmx(const std::string& impl) {
  const char* paths = std::getenv("TANDEM_BF16_AMX_PATHS");
  if (impl.find("amx") != std::string::npos || (paths && std::strcmp(paths, "always") == 0)) return;
  throw dnnl::error(dnnl_unimplemented, "not an AMX kernel");
}

// turned[kh][kw][o][ci] = w[KH-1-kh][KW-1-kw][ci][o]: the reversed convolution's HWIO filter (OC in, C out).
void TurnFilter(const ConvShape& s, const float* w, float* turned) {
  for (int kh = 0; kh < s.KH; kh++)
    for (int kw = 0; kw < s.KW; kw++) {
      const float* from = w + ((size_t)(s.KH - 1 - kh) * s.KW + (s.KW - 1 - kw)) * s.C * s.OC;
      float* to = turned + ((size_t)kh * s.KW + kw) * s.OC * s.C;
      for (int ci = 0; ci < s.C; ci++)
        for (int o = 0; o < s.OC; o++) to[(size_t)o * s.C + ci] = from[(size_t)ci * s.OC + o];
    }
}

}  // namespace tandem

// 2-D convolution with oneDNN: forward (optional bias and fused activation),
// backward data and backward weights. NHWC activations are used as they are;
// weights stay HWIO in JS and are reordered into the layout oneDNN picks
// (format_tag::any) through a cached reorder. One cached primitive per shape.
// Precision bf16: x, the filter and dy are rounded to bf16 by cached reorders
// before the primitive; y, dx, dw and the bias gradient stay float32 (fp32
// accumulation). By shape: an input gradient at stride 1 and "same" output
// runs as a forward convolution of the turned filter (conv-reversed.cc), a
// forward of one input channel in float32 (GetConv), a weight gradient of 1-3
// channels by im2col (conv-im2col.cc), a small one at "valid" padding as the
// "same" one over dy framed in zeros (CreateFramedWeights).
// Groups: G = C and OC = C·M is tfjs's depthwise convolution, whose filter
// [KH, KW, C, M] is described to oneDNN by strides as {G, M, 1, KH, KW}.
#include <cstring>
#include <sstream>

#include "conv-shape.h"
#include "dnnl-context.h"

namespace tandem {

namespace {

// ForwardBf16: forward writing bf16 (a relu convolution pooled in the same call, which applies the relu).
enum class ConvKind { Forward, BackwardData, BackwardWeights, ForwardBf16 };

ConvShape ReadShape(const Napi::Value& v) {
  int s[16];
  ReadInts(v, 16, "conv shape = [N,H,W,C,KH,KW,OC,strideH,strideW,padTop,padLeft,padBottom,padRight,outH,outW,groups]", s);
  ConvShape c{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]};
  bool ok = c.N > 0 && c.H > 0 && c.W > 0 && c.C > 0 && c.KH > 0 && c.KW > 0 && c.OC > 0 && c.sh > 0 && c.sw > 0 &&
            c.pt >= 0 && c.pl >= 0 && c.pb >= 0 && c.pr >= 0 &&
            c.OH == (c.H + c.pt + c.pb - c.KH) / c.sh + 1 && c.OW == (c.W + c.pl + c.pr - c.KW) / c.sw + 1 &&
            c.OH > 0 && c.OW > 0 && (c.G == 1 || (c.G == c.C && c.OC % c.G == 0));
  if (!ok) throw Napi::RangeError::New(v.Env(), "conv shape is inconsistent (output size must be (in + pads - filter) / stride + 1; groups 1, or groups = channels for a depthwise convolution)");
  return c;
}

std::string Key(ConvKind kind, const ConvShape& s, bool bias, bool bf16) {
  std::ostringstream k;
  k << "conv" << static_cast<int>(kind) << (bf16 ? ":bf16|" : ":f32|") << s.N << ',' << s.H << ',' << s.W << ','
    << s.C << ',' << s.KH << ',' << s.KW << ',' << s.OC << ',' << s.sh << ',' << s.sw << ',' << s.pt << ',' << s.pl
    << ',' << s.pb << ',' << s.pr << ',' << s.G << '|' << bias;
  return k.str();
}

// The weights' dims as oneDNN names them: OIHW, or GOIHW for a depthwise convolution.
memory::dims WeightDims(const ConvShape& s) {
  if (s.G == 1) return {s.OC, s.C, s.KH, s.KW};
  return {s.G, s.OC / s.G, 1, s.KH, s.KW};
}

// tfjs's filter layout: HWIO, or [KH, KW, C, M] (depthwise) given by strides.
memory::desc UserWeights(const ConvShape& s) {
  if (s.G == 1) return memory::desc(WeightDims(s), dt::f32, tag::hwio);
  memory::dim M = s.OC / s.G;
  return memory::desc(WeightDims(s), dt::f32, memory::dims{M, 1, 1, (memory::dim)s.KW * s.G * M, (memory::dim)s.G * M});
}

// The data types of one precision: what is multiplied (x, w, dy) and what is written (y, dx, dw, biases).
struct Types {
  dt in, out;
};

// The forward descriptor; bwdHint: as a hint for a backward primitive, whose diff_dst has the input type; inDst: y
// written in the input type.
dnnl::convolution_forward::primitive_desc ForwardPd(Ctx& c, const ConvShape& s, bool bias, Types t, bool bwdHint,
                                                    bool userScratch, bool inDst = false) {
  memory::dims strides{s.sh, s.sw}, padL{s.pt, s.pl}, padR{s.pb, s.pr};
  memory::desc x({s.N, s.C, s.H, s.W}, t.in, tag::nhwc);
  memory::desc y({s.N, s.OC, s.OH, s.OW}, bwdHint || inDst ? t.in : t.out, tag::nhwc);
  memory::desc wAny(WeightDims(s), t.in, tag::any), b({s.OC}, dt::f32, tag::x);
  dnnl::primitive_attr attr;
  if (userScratch) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto d = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                  x, wAny, b, y, strides, padL, padR)
                : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                  x, wAny, y, strides, padL, padR);
  return dnnl::convolution_forward::primitive_desc(d, attr, c.eng);
}

void CreateConv(Ctx& c, ConvEntry& e, ConvKind kind, const ConvShape& s, bool bias, Types t);

// A bf16 weight gradient at "valid" padding as the "same" one, for SmallValid3x3's shapes: dy framed in zeros
// to the input's size gives the same products (and zeros), summed in float32 in another order. oneDNN 2.6's AMX
// weight-gradient kernel is faster so on small outputs, despite the frame's extra work; one thread, 32 images, 3×3:
// 64→64 channels at 10×10 0.58 → 0.43 ms, 32→64 at 12×12 0.39 → 0.34, 64→64 at 6×6 0.33 → 0.27, 128→128 at 12×12
// 2.74 → 2.26; slower with fewer channels, wider outputs or 5×5 (16→16 at 34×34 0.39 → 1.31, 32→32 at 20×20
// 0.44 → 0.50, 32→32 5×5 at 9×9 0.37 → 0.55), hence the rule (SmallValid3x3), and only where oneDNN picked AMX for
// it. Chosen by the shape and the CPU, so every replica on this kind of CPU takes the same path. An infinite x meets
// a zero of the frame as it meets any zero of dy: NaN.
void CreateFramedWeights(Ctx& c, ConvEntry& e, const ConvShape& s, bool bias) {
  ConvShape same = s;
  same.pt = same.pb = (s.KH - 1) / 2;
  same.pl = same.pr = (s.KW - 1) / 2;
  same.OH = s.H;
  same.OW = s.W;
  ConvEntry made;  // e stays as it was where oneDNN has no AMX kernel at "same"
  made.x_md = e.x_md;
  made.w_md = e.w_md;
  made.b_md = e.b_md;
  made.y_md = memory::desc({s.N, s.OC, s.H, s.W}, dt::f32, tag::nhwc);
  CreateConv(c, made, ConvKind::BackwardWeights, same, bias, Types{dt::bf16, dt::f32});
  RequireAmx(made.impl);
  e.prim = made.prim;
  e.x = made.x;
  e.w = made.w;
  e.scratch = made.scratch;
  e.framed = made.y.buf;  // the primitive's diff_dst, [N, H, W, OC] in bf16: its frame stays zero
  std::memset(e.framed.get_data_handle(), 0, e.framed.get_desc().get_size());
  e.y.Init(c, e.y_md, memory::desc({s.N, s.OC, s.OH, s.OW}, dt::bf16, tag::nhwc), true);
  e.framedDy = true;
  e.impl = "framed+" + made.impl;
}

// dy's bf16 rows copied inside the frame (whose border stays zero).
void FrameDy(const ConvShape& s, const uint16_t* dy, uint16_t* framed) {
  const int top = (s.KH - 1) / 2, left = (s.KW - 1) / 2;
  const size_t row = (size_t)s.OW * s.OC;
  for (int n = 0; n < s.N; n++)
    for (int h = 0; h < s.OH; h++)
      std::memcpy(framed + (((size_t)n * s.H + h + top) * s.W + left) * s.OC, dy + ((size_t)n * s.OH + h) * row,
                  row * sizeof(uint16_t));
}

// Creates the primitive of one kind and precision into e; throws dnnl::error when oneDNN has no such kernel.
void CreateConv(Ctx& c, ConvEntry& e, ConvKind kind, const ConvShape& s, bool bias, Types t) {
  memory::dims strides{s.sh, s.sw}, padL{s.pt, s.pl}, padR{s.pb, s.pr};
  memory::desc wIn(WeightDims(s), t.in, tag::any), wOut(WeightDims(s), t.out, tag::any);
  // activations NHWC in either precision (oneDNN's blocked layouts, a reorder each way, were no faster in bf16)
  memory::desc xIn({s.N, s.C, s.H, s.W}, t.in, tag::nhwc), yIn({s.N, s.OC, s.OH, s.OW}, t.in, tag::nhwc);
  memory::desc xOut({s.N, s.C, s.H, s.W}, t.out, tag::nhwc);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  switch (kind) {
    case ConvKind::Forward:
    case ConvKind::ForwardBf16: {
      auto pd = ForwardPd(c, s, bias, t, false, true, kind == ConvKind::ForwardBf16);
      e.prim = dnnl::convolution_forward(pd);
      e.x.Init(c, e.x_md, pd.src_desc(), true);
      e.w.Init(c, e.w_md, pd.weights_desc(), true);
      e.y.Init(c, e.y_md, pd.dst_desc(), false);
      e.scratch = memory(pd.scratchpad_desc(), c.eng);
      e.impl = pd.impl_info_str();
      return;
    }
    case ConvKind::BackwardData: {
      auto hint = ForwardPd(c, s, false, t, true, false);
      auto d = dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, xOut, wIn, yIn, strides,
                                                     padL, padR);
      dnnl::convolution_backward_data::primitive_desc pd(d, attr, c.eng, hint);
      e.prim = dnnl::convolution_backward_data(pd);
      e.y.Init(c, e.y_md, pd.diff_dst_desc(), true);
      e.w.Init(c, e.w_md, pd.weights_desc(), true);
      e.x.Init(c, e.x_md, pd.diff_src_desc(), false);
      e.scratch = memory(pd.scratchpad_desc(), c.eng);
      e.impl = pd.impl_info_str();
      return;
    }
    case ConvKind::BackwardWeights: {
      auto hint = ForwardPd(c, s, bias, t, true, false);
      auto d = bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, xIn, wOut,
                                                               e.b_md, yIn, strides, padL, padR)
                    : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, xIn, wOut, yIn,
                                                               strides, padL, padR);
      dnnl::convolution_backward_weights::primitive_desc pd(d, attr, c.eng, hint);
      e.prim = dnnl::convolution_backward_weights(pd);
      e.x.Init(c, e.x_md, pd.src_desc(), true);
      e.y.Init(c, e.y_md, pd.diff_dst_desc(), true);
      e.w.Init(c, e.w_md, pd.diff_weights_desc(), false);
      e.scratch = memory(pd.scratchpad_desc(), c.eng);
      e.impl = pd.impl_info_str();
      return;
    }
  }
}

ConvEntry& GetConv(Ctx& c, ConvKind kind, const ConvShape& s, bool bias) {
  auto key = Key(kind, s, bias, c.bf16);
  auto it = c.conv.find(key);
  if (it != c.conv.end()) return *it->second;

  auto e = std::make_unique<ConvEntry>();
  e->x_md = memory::desc({s.N, s.C, s.H, s.W}, dt::f32, tag::nhwc);
  e->y_md = memory::desc({s.N, s.OC, s.OH, s.OW}, dt::f32, tag::nhwc);
  e->w_md = UserWeights(s);
  e->b_md = memory::desc({s.OC}, dt::f32, tag::x);
  bool made = false;
  // One input channel: oneDNN 2.6 has no AMX kernel for its forward (brgconv:avx512_core_bf16 took 0.33 ms where
  // float32's brgconv took 0.18, mnist-node's first layer, one thread): float32, as autocast leaves an op it cannot
  // speed up. Its gradients stay bf16.
  const bool f32ByRule = c.bf16 && kind == ConvKind::Forward && s.C == 1 && s.G == 1;
  if (c.bf16 && kind == ConvKind::BackwardData && ByReversedForward(s)) {
    try {
      CreateReversedData(c, *e, s);
      made = true;
    } catch (const dnnl::error&) {
      // no bf16 forward for it, or not on AMX: oneDNN's backward-data kernel below
    }
  }
  if (c.bf16 && kind == ConvKind::BackwardWeights && WeightsByIm2col(s)) {
    try {
      CreateIm2colWeights(c, *e, s, bias);
      made = true;
    } catch (const dnnl::error&) {
      // no bf16 matmul here, or not on AMX: the convolution's own weight gradient
    }
  }
  if (c.bf16 && kind == ConvKind::BackwardWeights && !made && SmallValid3x3(s)) {
    try {
      CreateFramedWeights(c, *e, s, bias);
      made = true;
    } catch (const dnnl::error&) {
      // no AMX kernel at "same": the primitive at "valid" below
    }
  }
  if (!made && !f32ByRule && (c.bf16 || kind == ConvKind::ForwardBf16)) {
    try {
      CreateConv(c, *e, kind, s, bias, Types{dt::bf16, dt::f32});
      made = true;
    } catch (const dnnl::error&) {
      // no bf16 kernel for this shape (or this CPU): float32, as autocast runs an op it cannot lower
    }
  }
  if (!made && kind == ConvKind::ForwardBf16) throw dnnl::error(dnnl_unimplemented, "no bf16 convolution kernel for this shape");
  if (!made) CreateConv(c, *e, kind, s, bias, Types{dt::f32, dt::f32});
  if (c.bf16 && !made) e->impl = (f32ByRule ? "f32 by rule (one input channel): " : "f32 fallback: ") + e->impl;
  c.primitivesCreated++;
  auto* p = e.get();
  c.conv.emplace(std::move(key), std::move(e));
  return *p;
}

// conv2dForward(x, w, bias | null, y, shape, activation, alpha, xShadow | null, xShadowFilled, yShadow?): 1 when the
// shadow holds x in bf16 afterwards, else 0. yShadow: y's bf16 bits, written in the activation's pass.
Napi::Value Conv2dForward(const Napi::CallbackInfo& info) {
  return Guard(info, "conv2dForward", [&]() -> Napi::Value {
    auto& c = GetCtx(info.Env());
    ConvShape s = ReadShape(info[4]);
    float* x = F32(info[0], s.xSize(), "x");
    float* w = F32(info[1], s.wSize(), "filter");
    float* b = OptionalF32(info[2], s.OC, "bias");
    float* y = F32(info[3], s.ySize(), "y");
    Activation act = ReadActivation(info[5]);
    double alpha = info[6].ToNumber().DoubleValue();
    Shadow xs = ReadShadow(info, 7, s.xSize());
    uint16_t* yShadow = OptionalShadowOut(info, 9, s.ySize());
    auto& e = GetConv(c, ConvKind::Forward, s, b != nullptr);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.x.Input(c, x, xs)},
                                         {DNNL_ARG_WEIGHTS, e.w.Input(c, w)},
                                         {DNNL_ARG_DST, e.y.Output(c, y)},
                                         {DNNL_ARG_SCRATCHPAD, e.scratch}};
    if (b) args.insert({DNNL_ARG_BIAS, memory(e.b_md, c.eng, b)});
    e.prim.execute(c.strm, args);
    e.y.Finish(c, y);
    c.strm.wait();
    ApplyActivation(y, s.ySize(), act, alpha, yShadow);
    return Napi::Number::New(info.Env(), xs.filled ? 1 : 0);
  });
}

// conv2dBackwardData(dy, w, dx, shape, dyShadow | null, dyShadowFilled): 1 when the shadow holds dy afterwards
Napi::Value Conv2dBackwardData(const Napi::CallbackInfo& info) {
  return Guard(info, "conv2dBackwardData", [&]() -> Napi::Value {
    auto& c = GetCtx(info.Env());
    ConvShape s = ReadShape(info[3]);
    float* dy = F32(info[0], s.ySize(), "dy");
    float* w = F32(info[1], s.wSize(), "filter");
    float* dx = F32(info[2], s.xSize(), "dx");
    Shadow dys = ReadShadow(info, 4, s.ySize());
    auto& e = GetConv(c, ConvKind::BackwardData, s, false);
    if (e.reversed) TurnFilter(s, w, e.turned.data());
    e.prim.execute(c.strm, {{e.reversed ? DNNL_ARG_SRC : DNNL_ARG_DIFF_DST, e.y.Input(c, dy, dys)},
                            {DNNL_ARG_WEIGHTS, e.w.Input(c, e.reversed ? e.turned.data() : w)},
                            {e.reversed ? DNNL_ARG_DST : DNNL_ARG_DIFF_SRC, e.x.Output(c, dx)},
                            {DNNL_ARG_SCRATCHPAD, e.scratch}});
    e.x.Finish(c, dx);
    c.strm.wait();
    return Napi::Number::New(info.Env(), dys.filled ? 1 : 0);
  });
}

// conv2dBackwardWeights(x, dy, dw, dbias | null, shape, xShadow | null, xShadowFilled, dyShadow | null,
// dyShadowFilled): bit 0 set when x's shadow holds x afterwards, bit 1 when dy's holds dy
Napi::Value Conv2dBackwardWeights(const Napi::CallbackInfo& info) {
  return Guard(info, "conv2dBackwardWeights", [&]() -> Napi::Value {
    auto& c = GetCtx(info.Env());
    ConvShape s = ReadShape(info[4]);
    float* x = F32(info[0], s.xSize(), "x");
    float* dy = F32(info[1], s.ySize(), "dy");
    float* dw = F32(info[2], s.wSize(), "dw");
    float* db = OptionalF32(info[3], s.OC, "dbias");
    Shadow xs = ReadShadow(info, 5, s.xSize()), dys = ReadShadow(info, 7, s.ySize());
    auto& e = GetConv(c, ConvKind::BackwardWeights, s, db != nullptr);
    if (e.im2col) {
      RunIm2colWeights(c, e, s, x, xs, dy, dys, dw, db);
      return Napi::Number::New(info.Env(), (xs.filled ? 1 : 0) | (dys.filled ? 2 : 0));
    }
    memory dyIn = e.y.Input(c, dy, dys);
    if (e.framedDy)
      FrameDy(s, static_cast<const uint16_t*>(dyIn.get_data_handle()), static_cast<uint16_t*>(e.framed.get_data_handle()));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.x.Input(c, x, xs)},
                                         {DNNL_ARG_DIFF_DST, e.framedDy ? e.framed : dyIn},
                                         {DNNL_ARG_DIFF_WEIGHTS, e.w.Output(c, dw)},
                                         {DNNL_ARG_SCRATCHPAD, e.scratch}};
    if (db) args.insert({DNNL_ARG_DIFF_BIAS, memory(e.b_md, c.eng, db)});
    e.prim.execute(c.strm, args);
    e.w.Finish(c, dw);
    c.strm.wait();
    return Napi::Number::New(info.Env(), (xs.filled ? 1 : 0) | (dys.filled ? 2 : 0));
  });
}

// conv2dReluMaxPool(x, w, bias | null, y, yShadow, winners, convShape, poolSize [FH, FW], xShadow | null,
// xShadowFilled): precision bf16 only. conv(x) + bias written in bf16 into a buffer of the primitive's own, then the
// max pool of its relu by windows that tile it (MaxPoolWinnersBf16, relu folded in: oneDNN's relu post-op would make
// a NaN 0): y = each window's value (a bf16 value, exact in float32), yShadow its bits, winners as maxPoolWinners
// records them. The convolution's output is never written in float32. Returns 1 when xShadow holds x afterwards.
Napi::Value Conv2dReluMaxPool(const Napi::CallbackInfo& info) {
  return Guard(info, "conv2dReluMaxPool", [&]() -> Napi::Value {
    auto& c = GetCtx(info.Env());
    if (!c.bf16) throw Napi::Error::New(info.Env(), "conv2dReluMaxPool runs in precision bf16 only");
    ConvShape s = ReadShape(info[6]);
    int pool[2];
    ReadInts(info[7], 2, "pool size = [filterH, filterW]", pool);
    const int FH = pool[0], FW = pool[1];
    if (FH < 1 || FW < 1 || s.OH % FH != 0 || s.OW % FW != 0 || FH * FW > 120)
      throw Napi::RangeError::New(info.Env(), "conv2dReluMaxPool: the pool's windows must tile the convolution's output");
    const size_t pooled = s.ySize() / ((size_t)FH * FW);
    float* x = F32(info[0], s.xSize(), "x");
    float* w = F32(info[1], s.wSize(), "filter");
    float* b = OptionalF32(info[2], s.OC, "bias");
    float* y = F32(info[3], pooled, "y");
    uint16_t* yBits = TypedData<uint16_t>(info[4], napi_uint16_array, "Uint16Array", pooled, "yShadow");
    int8_t* winners = TypedData<int8_t>(info[5], napi_int8_array, "Int8Array", pooled, "winners");
    Shadow xs = ReadShadow(info, 8, s.xSize());
    auto& e = GetConv(c, ConvKind::ForwardBf16, s, b != nullptr);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.x.Input(c, x, xs)},
                                         {DNNL_ARG_WEIGHTS, e.w.Input(c, w)},
                                         {DNNL_ARG_DST, e.y.buf},
                                         {DNNL_ARG_SCRATCHPAD, e.scratch}};
    if (b) args.insert({DNNL_ARG_BIAS, memory(e.b_md, c.eng, b)});
    e.prim.execute(c.strm, args);
    c.strm.wait();
    MaxPoolWinnersBf16(static_cast<const uint16_t*>(e.y.buf.get_data_handle()), y, yBits, winners,
                       {s.N, s.OH, s.OW, s.OC, FH, FW});
    return Napi::Number::New(info.Env(), xs.filled ? 1 : 0);
  });
}

}  // namespace

void RegisterConv(Napi::Env env, Napi::Object exports) {
  exports.Set("conv2dReluMaxPool", Napi::Function::New(env, Conv2dReluMaxPool));
  exports.Set("conv2dForward", Napi::Function::New(env, Conv2dForward));
  exports.Set("conv2dBackwardData", Napi::Function::New(env, Conv2dBackwardData));
  exports.Set("conv2dBackwardWeights", Napi::Function::New(env, Conv2dBackwardWeights));
}

}  // namespace tandem

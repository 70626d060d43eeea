// Batched matrix product with oneDNN: c[b] = act(op(a[b]) @ op(b[b]) + bias),
// row-major, batch dims broadcast when one side has batch 1. One cached
// primitive per shape, transposition, bias, activation and precision (bf16:
// a and b rounded to bf16, c accumulated and written in float32).
#include <sstream>

#include "dnnl-context.h"

namespace tandem {

namespace {

// The primitive for one shape with a and b multiplied in `in` (f32 or bf16; float32 arrays in JS either way,
// rounded by cached reorders), c and the bias float32. Throws dnnl::error when oneDNN has no such kernel.
void Create(Ctx& cx, MatmulEntry& e, int batchA, int batchB, int M, int K, int N, bool ta, bool tb, bool bias, dt in) {
  int batch = batchA > batchB ? batchA : batchB;
  memory::desc aUser({batchA, M, K}, dt::f32, ta ? tag::acb : tag::abc);
  memory::desc bUser({batchB, K, N}, dt::f32, tb ? tag::acb : tag::abc);
  memory::desc aIn({batchA, M, K}, in, ta ? tag::acb : tag::abc), bIn({batchB, K, N}, in, tb ? tag::acb : tag::abc);
  e.c_md = memory::desc({batch, M, N}, dt::f32, tag::abc);
  e.bias_md = memory::desc({1, 1, N}, dt::f32, tag::abc);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto d = bias ? dnnl::matmul::desc(aIn, bIn, e.bias_md, e.c_md) : dnnl::matmul::desc(aIn, bIn, e.c_md);
  dnnl::matmul::primitive_desc pd(d, attr, cx.eng);
  e.prim = dnnl::matmul(pd);
  e.a.Init(cx, aUser, pd.src_desc(), true);
  e.b.Init(cx, bUser, pd.weights_desc(), true);
  e.scratch = memory(pd.scratchpad_desc(), cx.eng);
  e.impl = pd.impl_info_str();
}

// matmul(a, b, bias | null, c, batchA, batchB, M, K, N, transposeA, transposeB, activation, alpha,
// aShadow | null, aShadowFilled, bShadow | null, bShadowFilled): bit 0 set when a's shadow holds a afterwards, bit 1
// when b's holds b. A shadow is the bf16 copy of the whole float32 array in its own element order, so a weight cast
// for the forward (b as is) serves the data gradient too (b transposed: the same memory read in another order).
Napi::Value Matmul(const Napi::CallbackInfo& info) {
  return Guard(info, "matmul", [&]() -> Napi::Value {
    auto& cx = GetCtx(info.Env());
    int batchA = Int(info[4], "batchA"), batchB = Int(info[5], "batchB");
    int M = Int(info[6], "M"), K = Int(info[7], "K"), N = Int(info[8], "N");
    bool ta = info[9].ToBoolean(), tb = info[10].ToBoolean();
    Activation act = ReadActivation(info[11]);
    double alpha = info[12].ToNumber().DoubleValue();
    if (batchA < 1 || batchB < 1 || M < 1 || K < 1 || N < 1 || (batchA != batchB && batchA != 1 && batchB != 1))
      throw Napi::RangeError::New(info.Env(), "matmul: sizes must be positive and batches equal or 1");
    int batch = batchA > batchB ? batchA : batchB;
    float* a = F32(info[0], (size_t)batchA * M * K, "a");
    float* b = F32(info[1], (size_t)batchB * K * N, "b");
    float* bias = OptionalF32(info[2], N, "bias");
    float* c = F32(info[3], (size_t)batch * M * N, "c");

    std::ostringstream k;
    k << "matmul" << (cx.bf16 ? ":bf16|" : ":f32|") << batchA << ',' << batchB << ',' << M << ',' << K << ',' << N
      << ',' << ta << ',' << tb << ',' << (bias != nullptr);
    auto& ent = cx.matmul[k.str()];
    if (!ent) {
      ent = std::make_unique<MatmulEntry>();
      bool made = false;
      if (cx.bf16) {
        try {
          Create(cx, *ent, batchA, batchB, M, K, N, ta, tb, bias != nullptr, dt::bf16);
          made = true;
        } catch (const dnnl::error&) {
          // no bf16 kernel here: float32
        }
      }
      if (!made) Create(cx, *ent, batchA, batchB, M, K, N, ta, tb, bias != nullptr, dt::f32);
      if (cx.bf16 && !made) ent->impl = "f32 fallback: " + ent->impl;
      cx.primitivesCreated++;
    }
    Shadow as = ReadShadow(info, 13, (size_t)batchA * M * K), bs = ReadShadow(info, 15, (size_t)batchB * K * N);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, ent->a.Input(cx, a, as)},
                                         {DNNL_ARG_WEIGHTS, ent->b.Input(cx, b, bs)},
                                         {DNNL_ARG_DST, memory(ent->c_md, cx.eng, c)},
                                         {DNNL_ARG_SCRATCHPAD, ent->scratch}};
    if (bias) args.insert({DNNL_ARG_BIAS, memory(ent->bias_md, cx.eng, bias)});
    ent->prim.execute(cx.strm, args);
    cx.strm.wait();
    ApplyActivation(c, static_cast<size_t>(batch) * M * N, act, alpha);
    return Napi::Number::New(info.Env(), (as.filled ? 1 : 0) | (bs.filled ? 2 : 0));
  });
}

}  // namespace

void RegisterMatmul(Napi::Env env, Napi::Object exports) {
  exports.Set("matmul", Napi::Function::New(env, Matmul));
}

}  // namespace tandem

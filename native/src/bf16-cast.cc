// float32 -> bf16 into a caller's buffer (the bf16 "shadow" of a float32 activation, src/engine/native/output-pool.ts)
// where a primitive's input differs from the user's array only in its data type: the same dims and strides (NHWC
// activations). The shadow is converted once and read by every primitive that takes the same activation (a
// convolution's forward and weight gradient read x; its data and weight gradients read dy), where each reordered it
// again. The same bits as oneDNN's reorder (test/native-bf16-shadow.test.ts compares convolutions through both):
// round to nearest even, subnormal inputs to a zero of their sign (as AVX512-BF16's vcvtneps2bf16 treats them), NaN
// made quiet.
#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "dnnl-context.h"

namespace tandem {

namespace {

// Whether d is a plain layout: no inner blocks, no padding, no offset, no extra flags.
bool Plain(const dnnl_memory_desc_t& m) {
  if (m.format_kind != dnnl_blocked || m.offset0 != 0 || m.extra.flags != 0) return false;
  if (m.format_desc.blocking.inner_nblks != 0) return false;
  for (int i = 0; i < m.ndims; i++)
    if (m.padded_dims[i] != m.dims[i] || m.padded_offsets[i] != 0) return false;
  return true;
}

}  // namespace

TANDEM_SIMD void CastToBf16Portable(const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = Bf16Of(src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// AVX512-BF16's vcvtne2ps2bf16, 32 values an instruction: the same bits as Bf16Of for every one of the 2^32 float32
// patterns (checked exhaustively on this project's machine; test/bf16-cast.test.ts compares the paths), twice as fast
// as Bf16Of's integer steps on a 2 MB activation (0.22 -> 0.11 ms, one core).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void CastToBf16Instruction(
    const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh two = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
    _mm512_storeu_si512(dst + i, reinterpret_cast<__m512i>(two));
  }
  for (; i < n; i++) dst[i] = Bf16Of(src[i]);
}
bool CastsByInstruction() {
  static const bool has = __builtin_cpu_supports("avx512bf16") && StreamsAvx512();
  return has;
}
#else
void CastToBf16Instruction(const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  CastToBf16Portable(src, dst, n);
}
bool CastsByInstruction() { return false; }
#endif

void CastToBf16(const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  if (CastsByInstruction())
    CastToBf16Instruction(src, dst, n);
  else
    CastToBf16Portable(src, dst, n);
}

bool IsBf16Cast(const memory::desc& user, const memory::desc& prim) {
  if (user.data_type() != dt::f32 || prim.data_type() != dt::bf16) return false;
  const dnnl_memory_desc_t &u = user.data, &p = prim.data;
  if (u.ndims != p.ndims || !Plain(u) || !Plain(p)) return false;
  for (int i = 0; i < u.ndims; i++)
    if (u.dims[i] != p.dims[i] || u.format_desc.blocking.strides[i] != p.format_desc.blocking.strides[i]) return false;
  return prim.get_size() * 2 == user.get_size();  // dense: every element once
}

uint16_t* OptionalShadowOut(const Napi::CallbackInfo& info, size_t at, size_t need) {
  if (info.Length() <= at || info[at].IsNull() || info[at].IsUndefined()) return nullptr;
  return TypedData<uint16_t>(info[at], napi_uint16_array, "Uint16Array", need, "bf16 shadow");
}

Shadow ReadShadow(const Napi::CallbackInfo& info, size_t at, size_t need) {
  Shadow s;
  s.bits = OptionalShadowOut(info, at, need);
  if (!s.bits) return s;
  const double state = info.Length() > at + 1 ? info[at + 1].ToNumber().DoubleValue() : 0;
  s.filled = state == 1 || state == 2;
  s.stale = state == 2;
  return s;
}

TANDEM_SIMD void WidenBf16(const uint16_t* __restrict bits, float* __restrict out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = Widened(bits[i]);
}

memory Conversion::Input(Ctx& c, void* p, Shadow& shadow) {
  if (!needed || !cast || !shadow.bits) {
    if (shadow.stale) {  // this primitive reads float32 (or another layout): the values from the shadow first
      WidenBf16(shadow.bits, static_cast<float*>(p), user.get_size() / sizeof(float));
      shadow.stale = false;
    }
    return Input(c, p);
  }
  if (!shadow.filled)
    CastToBf16(static_cast<const float*>(p), shadow.bits, user.get_size() / sizeof(float));
  shadow.filled = true;
  return memory(buf.get_desc(), c.eng, shadow.bits);
}

namespace {

// castToBf16(src: Float32Array, dst: Uint16Array, path: 'auto' | 'portable'): dst = src in bf16, by the path CastToBf16
// picks ('auto') or by Bf16Of's integer steps; returns the path taken ('instruction' or 'portable'). For tests.
Napi::Value CastToBf16Js(const Napi::CallbackInfo& info) {
  const size_t n = info[0].IsTypedArray() ? info[0].As<Napi::TypedArray>().ElementLength() : 0;
  const float* src = F32(info[0], n, "src");
  uint16_t* dst = TypedData<uint16_t>(info[1], napi_uint16_array, "Uint16Array", n, "dst");
  const std::string path = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
  if (path != "auto" && path != "portable") throw Napi::TypeError::New(info.Env(), "path must be 'auto' or 'portable'");
  const bool instruction = path == "auto" && CastsByInstruction();
  if (instruction)
    CastToBf16(src, dst, n);
  else
    CastToBf16Portable(src, dst, n);
  return Napi::String::New(info.Env(), instruction ? "instruction" : "portable");
}

// widenBf16(bits: Uint16Array, out: Float32Array): out = bits widened to float32 (exact), over bits' length: a stale
// array's values from its shadow (src/engine/native/bf16-only-outputs.ts).
Napi::Value WidenBf16Js(const Napi::CallbackInfo& info) {
  const size_t n = info[0].IsTypedArray() ? info[0].As<Napi::TypedArray>().ElementLength() : 0;
  const uint16_t* bits = TypedData<uint16_t>(info[0], napi_uint16_array, "Uint16Array", n, "bits");
  WidenBf16(bits, F32(info[1], n, "out"), n);
  return info.Env().Undefined();
}

}  // namespace

void RegisterBf16Cast(Napi::Env env, Napi::Object exports) {
  exports.Set("castToBf16", Napi::Function::New(env, CastToBf16Js));
  exports.Set("widenBf16", Napi::Function::New(env, WidenBf16Js));
}

}  // namespace tandem

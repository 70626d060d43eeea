// float32 -> bf16 into a caller's buffer (the bf16 "shadow" of a float32 activation, src/engine/native/output-pool.ts)
// where a primitive's input differs from the user's array only in its data type: the same dims and strides (NHWC
// activations). The shadow is converted once and read by every primitive that takes the same activation (a
// convolution's forward and weight gradient read x; its data and weight gradients read dy), where each reordered it
// again. The same bits as oneDNN's reorder (test/native-bf16-shadow.test.ts compares convolutions through both):
// round to nearest even, subnormal inputs to a zero of their sign (as AVX512-BF16's vcvtneps2bf16 treats them), NaN
// made quiet.
#include <cstdint>
#include <cstring>

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

TANDEM_SIMD void CastToBf16(const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = Bf16Of(src[i]);
}

bool IsBf16Cast(const memory::desc& user, const memory::desc& prim) {
  if (user.data_type() != dt::f32 || prim.data_type() != dt::bf16) return false;
  const dnnl_memory_desc_t &u = user.data, &p = prim.data;
  if (u.ndims != p.ndims || !Plain(u) || !Plain(p)) return false;
  for (int i = 0; i < u.ndims; i++)
    if (u.dims[i] != p.dims[i] || u.format_desc.blocking.strides[i] != p.format_desc.blocking.strides[i]) return false;
  return prim.get_size() * 2 == user.get_size();  // dense: every element once
}

Shadow ReadShadow(const Napi::CallbackInfo& info, size_t at, size_t need) {
  if (info.Length() <= at || info[at].IsNull() || info[at].IsUndefined()) return {};
  Shadow s;
  s.bits = TypedData<uint16_t>(info[at], napi_uint16_array, "Uint16Array", need, "bf16 shadow");
  s.filled = info.Length() > at + 1 && info[at + 1].ToBoolean().Value();
  return s;
}

memory Conversion::Input(Ctx& c, void* p, Shadow& shadow) {
  if (!needed || !cast || !shadow.bits) return Input(c, p);
  if (!shadow.filled)
    CastToBf16(static_cast<const float*>(p), shadow.bits, user.get_size() / sizeof(float));
  shadow.filled = true;
  return memory(buf.get_desc(), c.eng, shadow.bits);
}

}  // namespace tandem

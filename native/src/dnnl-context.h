// Per-thread oneDNN context and the argument checks every kernel shares.
// One Ctx per Node environment (main thread or worker_thread): engine, stream
// and primitive caches are never shared across threads.
#pragma once
#include <napi.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Ctx;

// A float32 activation's bf16 copy held by JS (src/engine/native/output-pool.ts): `filled` once it holds the
// activation rounded to bf16 (by an earlier primitive, or by this one). `stale`: the float32 array was never written
// (a gradient that only convolutions read, written in bf16 alone): a kernel that reads the float32 values widens the
// shadow into the array first (WidenBf16).
struct Shadow {
  uint16_t* bits = nullptr;
  bool filled = false;
  bool stale = false;
};
// The shadow at info[at] (a Uint16Array of at least `need` elements, or null) and its state at info[at + 1]: false or
// 0 empty, true or 1 filled, 2 filled with the float32 array stale.
Shadow ReadShadow(const Napi::CallbackInfo& info, size_t at, size_t need);
// bf16 -> float32 (exact): a stale array's values from its shadow.
void WidenBf16(const uint16_t* __restrict bits, float* __restrict out, size_t n);

// One argument of a primitive as JS holds it (float32, a plain layout) and as the primitive wants it (a blocked
// layout, or bf16 under precision bf16): a cached reorder and buffer between the two when they differ.
struct Conversion {
  memory::desc user;
  bool needed = false;
  memory buf;
  dnnl::reorder r;
  // An input whose conversion is float32 -> bf16 in the same layout: it can read a shadow (bf16-cast.cc).
  bool cast = false;
  // toPrimitive: an input (user -> buf before the primitive); else an output (buf -> user after it).
  void Init(Ctx& c, const memory::desc& userMd, const memory::desc& primMd, bool toPrimitive);
  // The memory the primitive reads or writes for the user's array p (converting an input now, when needed).
  memory Input(Ctx& c, void* p);
  // An input that can come from the shadow: the shadow's bits (converted into it first unless filled; `shadow.filled`
  // is then true), else as Input(c, p) (the shadow left as it was).
  memory Input(Ctx& c, void* p, Shadow& shadow);
  memory Output(Ctx& c, void* p);
  // After the primitive: the buffer written back into the user's array (outputs only).
  void Finish(Ctx& c, void* p);
};

// A cached convolution primitive (forward, backward data or backward weights) for one shape and precision.
// Forward: src = x, weights = w, dst = y; backward data: diff_dst = y, weights = w, diff_src = x;
// backward weights: src = x, diff_dst = y, diff_weights = w.
struct ConvEntry {
  memory::desc x_md, w_md, y_md, b_md;  // the JS layouts: NHWC, HWIO, bias x (float32)
  dnnl::primitive prim;
  Conversion x, w, y;
  memory scratch;
  std::string impl;  // oneDNN's implementation string ("f32 fallback: ..." where bf16 had no kernel)
  // A weight gradient as im2col and matmuls (conv-im2col.cc): prim is a chunk's matmul (tailPrim the last, smaller
  // chunk's), y converts dy; a chunk's columns, the summed output, and x in bf16, padded, channel by channel.
  bool im2col = false;
  dnnl::primitive tailPrim;
  memory cols, dst;
  std::vector<uint16_t> planar;
  // A bf16 input gradient as a forward convolution (conv.cc, ByReversedForward): prim is that forward, reading dy
  // (y) and writing dx (x); `turned` holds the filter turned 180° with its channels swapped, in HWIO.
  bool reversed = false;
  std::vector<float> turned;
  // A bf16 weight gradient at "valid" padding as the "same" one (conv.cc, CreateFramedWeights): prim reads `framed`, dy
  // in bf16 set inside a zero frame of the input's size (y casts dy, or reads its shadow, before it is copied in).
  bool framedDy = false;
  memory framed;
};

// A cached matmul primitive for one shape, transposition, bias, activation and precision.
struct MatmulEntry {
  memory::desc c_md, bias_md;
  dnnl::matmul prim;
  Conversion a, b;
  memory scratch;
  std::string impl;
};

struct Ctx {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::unordered_map<std::string, std::unique_ptr<ConvEntry>> conv;
  std::unordered_map<std::string, std::unique_ptr<MatmulEntry>> matmul;
  uint64_t primitivesCreated = 0;
  // precision bf16: convolutions and matmuls multiply in bf16 (inputs rounded to nearest even), accumulate and
  // write in float32; a shape oneDNN has no bf16 kernel for runs in float32.
  bool bf16 = false;
};

Ctx& GetCtx(Napi::Env env);

// The addon's own loops (elementwise, pooling, BatchNormalization, reductions, the optimizer updates), compiled
// three times — AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and baseline x86-64 — the CPU's best picked when the addon
// loads (GCC function multiversioning): a build runs on any x86-64 and uses the wide vectors where they exist.
// The same bits on every path: the loops vectorise across independent elements (no reassociation) and
// -ffp-contract=off forbids fused multiply-adds. BatchNormalization's gradient loops ran ~2.5× faster on AVX-512.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TANDEM_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TANDEM_SIMD
#endif

// Whether this CPU has the AVX-512 subsets the streaming stores use (F, BW, VL).
inline bool StreamsAvx512() {
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return has;
}
// Orders streaming (non-temporal) stores before whatever follows them.
inline void StoreFence() { __builtin_ia32_sfence(); }

// Whether prim is user's layout in bf16 (user float32; both plain and dense): a cast, which a shadow can stand for.
bool IsBf16Cast(const memory::desc& user, const memory::desc& prim);

// float32 -> bf16 as oneDNN's reorder rounds: to nearest even, a subnormal to a zero of its sign (as AVX512-BF16's
// vcvtneps2bf16), NaN made quiet.
inline uint16_t Bf16Of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  const uint32_t abs = u & 0x7fffffffu;
  const uint32_t nearestEven = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u, signedZero = (u >> 16) & 0x8000u;
  return static_cast<uint16_t>(abs > 0x7f800000u ? quietNan : abs < 0x00800000u ? signedZero : nearestEven);
}

// bf16 -> float32: exact, the bits in the high half.
inline float Widened(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float32 -> bf16 (Bf16Of) of n values: the cast conversions' loop (bf16-cast.cc), ~3× oneDNN 2.6's reorder; by
// AVX512-BF16's instruction where the CPU has it (CastsByInstruction), else by Bf16Of's integer steps (Portable).
void CastToBf16(const float* __restrict src, uint16_t* __restrict dst, size_t n);
void CastToBf16Portable(const float* __restrict src, uint16_t* __restrict dst, size_t n);
bool CastsByInstruction();
// A kernel's output written with its bf16 shadow (src/engine/native/output-pool.ts) for the convolution that reads it
// next: the optional Uint16Array at info[at] (nullptr when absent or null), at least `need` long.
uint16_t* OptionalShadowOut(const Napi::CallbackInfo& info, size_t at, size_t need);
// How many elements a kernel writes before casting them into its output's shadow (when it has one, else all n): whole
// units (rows) of about 4,096 elements, a block still in L1, where a cast pass of its own (CastToBf16 in the
// convolution) reads the whole activation back from memory. The loop over blocks stays in the kernel's own body: a
// lambda would be compiled once, for the baseline target, outside the kernel's AVX-512 clone.
inline size_t ShadowBlock(size_t n, size_t unit, const uint16_t* shadow) {
  constexpr size_t kBlock = 4096;
  if (!shadow || n == 0) return n == 0 ? 1 : n;
  return unit >= kBlock ? unit : kBlock / unit * unit;
}

// The Float32Array's own data pointer (works for SharedArrayBuffer-backed arrays,
// where TypedArray::ArrayBuffer().Data() throws). Checks the element count.
float* F32(const Napi::Value& v, size_t need, const char* name);
// The data of a typed array of `type` (a TypeError names `name` and `typeName` otherwise) with at least `need` elements.
template <typename T>
T* TypedData(const Napi::Value& v, napi_typedarray_type type, const char* typeName, size_t need, const char* name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    throw Napi::TypeError::New(v.Env(), std::string(name) + " must be a " + typeName);
  auto a = v.As<Napi::TypedArrayOf<T>>();
  if (a.ElementLength() < need) throw Napi::RangeError::New(v.Env(), std::string(name) + " is too short");
  return a.Data();
}
// Optional Float32Array: nullptr for null/undefined.
float* OptionalF32(const Napi::Value& v, size_t need, const char* name);
int Int(const Napi::Value& v, const char* name);
// Reads a JS array of exactly `count` numbers into out; a TypeError shows `usage` otherwise.
void ReadInts(const Napi::Value& v, uint32_t count, const char* usage, int* out);

// Fused activations, numbered as in src/engine/native/native-addon.ts.
enum class Activation : int { Linear = 0, Relu = 1, Relu6 = 2, LeakyRelu = 3, Sigmoid = 4, Elu = 5 };
Activation ReadActivation(const Napi::Value& v);
// Applies the activation to y[0, n) in place, as tfjs's cpu kernels compute it (JS arithmetic
// in double, rounded to float32 when stored). Not a oneDNN post-op: oneDNN's relu, clip and exp
// turn NaN into numbers (max/min with a constant), and a NaN must reach the user.
void ApplyActivation(float* y, size_t n, Activation act, double alpha);
// The same, block by block, each block cast into shadow (when not null) right after: y's bf16 shadow for the
// convolution that reads it next.
void ApplyActivation(float* y, size_t n, Activation act, double alpha, uint16_t* shadow);

// relu as the native Relu kernel computes it (eltwise.cc), Math.max(0, v): NaN stays NaN, -0 becomes 0.
inline float ReluValue(float v) { return (v > 0.f || v != v) ? v : 0.f; }
// relu's derivative as TandemReluGrad computes it (eltwise.cc's reluGrad): x > 0 ? 1 : 0, NaN where x is NaN.
inline float ReluStep(float x) { return x != x ? x : (x > 0.f ? 1.f : 0.f); }

// Runs f, turning oneDNN errors into JS errors that name the kernel.
template <typename F>
Napi::Value Guard(const Napi::CallbackInfo& info, const char* kernel, F f) {
  try {
    return f();
  } catch (const dnnl::error& err) {
    throw Napi::Error::New(info.Env(), std::string("tandem native ") + kernel + ": oneDNN: " + err.what());
  }
}

// The implementation strings of this thread's cached primitives, by kernel key (for benches and reports).
void ListImplementations(Ctx& c, Napi::Object out);

// maxPoolWinners' records beside a winner's index in its window: a window of -inf (no winner), one holding a NaN.
constexpr int8_t kNoWinner = -1, kHoldsNaN = -2;

// A bf16 activation [N, H, W, C] max-pooled by FH×FW windows that tile it (pool-bf16.cc).
struct TiledPool {
  int N, H, W, C, FH, FW;
};
// maxPoolWinners of relu(x) for bf16 x, the relu folded in: y = what a strict scan of the relu'd cells gives (widened,
// exact), yBits its bf16 bits, winners the first cell holding it (kNoWinner -1 for a window of -inf, kHoldsNaN -2 when
// it holds a NaN).
void MaxPoolWinnersBf16(const uint16_t* x, float* y, uint16_t* yBits, int8_t* winners, const TiledPool& p);

void RegisterConv(Napi::Env env, Napi::Object exports);
void RegisterMatmul(Napi::Env env, Napi::Object exports);
void RegisterPool(Napi::Env env, Napi::Object exports);

void RegisterEltwise(Napi::Env env, Napi::Object exports);
void RegisterFlatOps(Napi::Env env, Napi::Object exports);
void RegisterHalfOps(Napi::Env env, Napi::Object exports);
void RegisterBatchNorm(Napi::Env env, Napi::Object exports);
void RegisterBroadcast(Napi::Env env, Napi::Object exports);
void RegisterBf16Cast(Napi::Env env, Napi::Object exports);

}  // namespace tandem

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

namespace tandem {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// A cached convolution primitive (forward, backward data or backward weights) for one shape.
struct ConvEntry {
  memory::desc x_md, w_md, y_md, b_md;  // the JS layouts: NHWC, HWIO, bias x
  dnnl::primitive prim;
  bool reorder_w = false;  // weights (fwd, bwd data) or weight gradient (bwd weights) need a reorder
  dnnl::reorder w_reorder;
  memory w_buf, scratch;
};

// A cached matmul primitive for one shape, transposition, bias and activation.
struct MatmulEntry {
  memory::desc a_md, b_md, c_md, bias_md;
  dnnl::matmul prim;
  memory scratch;
};

struct Ctx {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::unordered_map<std::string, std::unique_ptr<ConvEntry>> conv;
  std::unordered_map<std::string, std::unique_ptr<MatmulEntry>> matmul;
  uint64_t primitivesCreated = 0;
};

Ctx& GetCtx(Napi::Env env);

// The Float32Array's own data pointer (works for SharedArrayBuffer-backed arrays,
// where TypedArray::ArrayBuffer().Data() throws). Checks the element count.
float* F32(const Napi::Value& v, size_t need, const char* name);
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

// Runs f, turning oneDNN errors into JS errors that name the kernel.
template <typename F>
Napi::Value Guard(const Napi::CallbackInfo& info, const char* kernel, F f) {
  try {
    return f();
  } catch (const dnnl::error& err) {
    throw Napi::Error::New(info.Env(), std::string("tandem native ") + kernel + ": oneDNN: " + err.what());
  }
}

void RegisterConv(Napi::Env env, Napi::Object exports);
void RegisterMatmul(Napi::Env env, Napi::Object exports);
void RegisterPool(Napi::Env env, Napi::Object exports);
void RegisterEltwise(Napi::Env env, Napi::Object exports);
void RegisterFlatOps(Napi::Env env, Napi::Object exports);
void RegisterHalfOps(Napi::Env env, Napi::Object exports);

}  // namespace tandem

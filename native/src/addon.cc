// tandem's native kernels: oneDNN convolution and matmul, C++ pooling and
// elementwise loops, on the tfjs cpu backend's Float32Arrays without copies;
// the comm side's all-reduce mean and optimizer updates on flat ranges, and the fp16/bf16
// hooks' compression and decoding.
#include <malloc.h>
#include <pthread.h>
#include <algorithm>
#include <cmath>
#include <omp.h>

#include <sstream>

#include "dnnl-context.h"

namespace tandem {

Ctx& GetCtx(Napi::Env env) {
  Ctx* c = env.GetInstanceData<Ctx>();
  if (!c) {
    c = new Ctx();
    env.SetInstanceData<Ctx>(c);  // deleted with the environment (thread exit)
  }
  return *c;
}

float* F32(const Napi::Value& v, size_t need, const char* name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw Napi::TypeError::New(v.Env(), std::string(name) + " must be a Float32Array");
  auto a = v.As<Napi::Float32Array>();
  if (a.ElementLength() < need) {
    std::ostringstream os;
    os << name << " holds " << a.ElementLength() << " floats, the kernel needs " << need;
    throw Napi::RangeError::New(v.Env(), os.str());
  }
  return a.Data();
}

float* OptionalF32(const Napi::Value& v, size_t need, const char* name) {
  if (v.IsNull() || v.IsUndefined()) return nullptr;
  return F32(v, need, name);
}

int Int(const Napi::Value& v, const char* name) {
  if (!v.IsNumber()) throw Napi::TypeError::New(v.Env(), std::string(name) + " must be a number");
  return v.As<Napi::Number>().Int32Value();
}

void ReadInts(const Napi::Value& v, uint32_t count, const char* usage, int* out) {
  if (!v.IsArray() || v.As<Napi::Array>().Length() != count) throw Napi::TypeError::New(v.Env(), usage);
  auto a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < count; i++) out[i] = Int(a.Get(i), usage);
}

Activation ReadActivation(const Napi::Value& v) {
  int a = Int(v, "activation");
  if (a < 0 || a > 5) throw Napi::RangeError::New(v.Env(), "activation code must be 0..5");
  return static_cast<Activation>(a);
}

TANDEM_SIMD void ApplyActivation(float* y, size_t n, Activation act, double alpha) {
  switch (act) {
    case Activation::Linear: return;
    case Activation::Relu:  // Math.max(0, x): NaN stays NaN, -0 becomes 0
      for (size_t i = 0; i < n; i++) { float v = y[i]; y[i] = (v > 0.f || v != v) ? v : 0.f; }
      return;
    case Activation::Relu6:  // Math.min(Math.max(0, x), 6)
      for (size_t i = 0; i < n; i++) { float v = y[i]; y[i] = v != v ? v : v > 6.f ? 6.f : v > 0.f ? v : 0.f; }
      return;
    case Activation::LeakyRelu:  // x < 0 ? alpha * x : x
      for (size_t i = 0; i < n; i++) { float v = y[i]; if (v < 0.f) y[i] = static_cast<float>(alpha * v); }
      return;
    case Activation::Sigmoid:  // 1 / (1 + Math.exp(-x))
      for (size_t i = 0; i < n; i++) y[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(y[i]))));
      return;
    case Activation::Elu:  // x >= 0 ? x : Math.exp(x) - 1
      for (size_t i = 0; i < n; i++) { float v = y[i]; if (!(v >= 0.f)) y[i] = static_cast<float>(std::exp(static_cast<double>(v)) - 1.0); }
      return;
  }
}

void ApplyActivation(float* y, size_t n, Activation act, double alpha, uint16_t* shadow) {
  for (size_t from = 0, block = ShadowBlock(n, 1, shadow); from < n; from += block) {
    const size_t to = std::min(n, from + block);
    ApplyActivation(y + from, to - from, act, alpha);
    if (shadow) CastToBf16(y + from, shadow + from, to - from);
  }
}

void Conversion::Init(Ctx& c, const memory::desc& userMd, const memory::desc& primMd, bool toPrimitive) {
  user = userMd;
  needed = primMd != userMd;
  if (!needed) return;
  buf = memory(primMd, c.eng);
  cast = toPrimitive && IsBf16Cast(userMd, primMd);
  memory plain(userMd, c.eng, DNNL_MEMORY_NONE);
  r = toPrimitive ? dnnl::reorder(plain, buf) : dnnl::reorder(buf, plain);
}

memory Conversion::Input(Ctx& c, void* p) {
  if (cast) {
    CastToBf16(static_cast<const float*>(p), static_cast<uint16_t*>(buf.get_data_handle()), user.get_size() / 4);
    return buf;
  }
  memory u(user, c.eng, p);
  if (!needed) return u;
  r.execute(c.strm, u, buf);
  return buf;
}

memory Conversion::Output(Ctx& c, void* p) { return needed ? buf : memory(user, c.eng, p); }

void Conversion::Finish(Ctx& c, void* p) {
  if (!needed) return;
  memory u(user, c.eng, p);
  r.execute(c.strm, buf, u);
}

void ListImplementations(Ctx& c, Napi::Object out) {
  for (auto& [key, e] : c.conv) out.Set(key, e->impl);
  for (auto& [key, e] : c.matmul) out.Set(key, e->impl);
}

namespace {

const char* IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "other";
  }
}

// setPrecision('fp32' | 'bf16'): what this thread's convolutions and matmuls multiply in.
Napi::Value SetPrecision(const Napi::CallbackInfo& info) {
  std::string p = info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  if (p != "fp32" && p != "bf16") throw Napi::TypeError::New(info.Env(), "precision must be 'fp32' or 'bf16'");
  GetCtx(info.Env()).bf16 = p == "bf16";
  return info.Env().Undefined();
}

Napi::Value GetPrecision(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), GetCtx(info.Env()).bf16 ? "bf16" : "fp32");
}

// bf16Support(): oneDNN's effective ISA and the implementation it picks for a small bf16 matmul with float32
// output ('' with the reason when it has none).
Napi::Value Bf16Support(const Napi::CallbackInfo& info) {
  auto& c = GetCtx(info.Env());
  auto o = Napi::Object::New(info.Env());
  o.Set("isa", IsaName(dnnl::get_effective_cpu_isa()));
  try {
    memory::desc a({64, 256}, dt::bf16, tag::ab), b({256, 64}, dt::bf16, tag::ab), y({64, 64}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, y), c.eng);
    o.Set("implementation", pd.impl_info_str());
  } catch (const dnnl::error& err) {
    o.Set("implementation", "");
    o.Set("reason", err.what());
  }
  return o;
}

// implementations(): { kernel key: oneDNN implementation } for this thread's cached primitives.
Napi::Value Implementations(const Napi::CallbackInfo& info) {
  auto o = Napi::Object::New(info.Env());
  ListImplementations(GetCtx(info.Env()), o);
  return o;
}

Napi::Value SetNumThreads(const Napi::CallbackInfo& info) {
  int n = Int(info[0], "threads");
  if (n < 1) throw Napi::RangeError::New(info.Env(), "threads must be at least 1");
  omp_set_num_threads(n);  // per OS thread: every worker sets its own
  return info.Env().Undefined();
}

// retainFreedMemory(mmapThresholdBytes, trimThresholdBytes): tfjs allocates a fresh
// Float32Array for every kernel output; with glibc's defaults, large ones are
// mmap'ed and unmapped each time, and every first touch of a page faults
// (~1 ms per 4 MB output). Raising both thresholds lets freed blocks be reused.
Napi::Value RetainFreedMemory(const Napi::CallbackInfo& info) {
  int mmapThreshold = Int(info[0], "mmapThresholdBytes"), trimThreshold = Int(info[1], "trimThresholdBytes");
  bool ok = mallopt(M_MMAP_THRESHOLD, mmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, trimThreshold) == 1;
  return Napi::Boolean::New(info.Env(), ok);
}

// misalignment(buffer): how many bytes past a 64-byte boundary the ArrayBuffer's data starts (V8 places a large
// buffer 16 bytes into a page). oneDNN's AMX and AVX-512 kernels read and write a misaligned array about 2× slower
// (a cache line split per vector or tile row): output-pool.ts starts its arrays on a boundary.
Napi::Value Misalignment(const Napi::CallbackInfo& info) {
  if (!info[0].IsArrayBuffer()) throw Napi::TypeError::New(info.Env(), "buffer must be an ArrayBuffer");
  auto address = reinterpret_cast<uintptr_t>(info[0].As<Napi::ArrayBuffer>().Data());
  return Napi::Number::New(info.Env(), static_cast<double>(address % 64));
}

Napi::Value GetNumThreads(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), omp_get_max_threads());
}

Napi::Value Version(const Napi::CallbackInfo& info) {
  auto v = dnnl::version();
  std::ostringstream os;
  os << v->major << '.' << v->minor << '.' << v->patch;
  auto o = Napi::Object::New(info.Env());
  o.Set("onednn", os.str());
  o.Set("cpuRuntime", v->cpu_runtime == DNNL_RUNTIME_OMP ? "openmp" : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential" : "other");
  return o;
}

Napi::Value PrimitivesCreated(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(GetCtx(info.Env()).primitivesCreated));
}

// nameThread(name): this OS thread's name (what top -H, perf and /proc/self/task/*/comm show), cut to the 15 bytes
// Linux keeps. Returns whether the name was taken.
Napi::Value NameThread(const Napi::CallbackInfo& info) {
  if (!info[0].IsString()) throw Napi::TypeError::New(info.Env(), "name must be a string");
  const std::string name = info[0].As<Napi::String>().Utf8Value().substr(0, 15);
  return Napi::Boolean::New(info.Env(), pthread_setname_np(pthread_self(), name.c_str()) == 0);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("setNumThreads", Napi::Function::New(env, SetNumThreads));
  exports.Set("retainFreedMemory", Napi::Function::New(env, RetainFreedMemory));
  exports.Set("getNumThreads", Napi::Function::New(env, GetNumThreads));
  exports.Set("misalignment", Napi::Function::New(env, Misalignment));
  exports.Set("version", Napi::Function::New(env, Version));
  exports.Set("primitivesCreated", Napi::Function::New(env, PrimitivesCreated));
  exports.Set("setPrecision", Napi::Function::New(env, SetPrecision));
  exports.Set("getPrecision", Napi::Function::New(env, GetPrecision));
  exports.Set("bf16Support", Napi::Function::New(env, Bf16Support));
  exports.Set("implementations", Napi::Function::New(env, Implementations));
  exports.Set("nameThread", Napi::Function::New(env, NameThread));
  RegisterConv(env, exports);
  RegisterMatmul(env, exports);
  RegisterPool(env, exports);
  RegisterEltwise(env, exports);
  RegisterFlatOps(env, exports);
  RegisterBatchNorm(env, exports);
  RegisterHalfOps(env, exports);
  RegisterBroadcast(env, exports);
  RegisterBf16Cast(env, exports);
  return exports;
}

}  // namespace
}  // namespace tandem

static Napi::Object InitTandemNative(Napi::Env env, Napi::Object exports) { return tandem::Init(env, exports); }

NODE_API_MODULE(tandem_native, InitTandemNative)

// BatchNormalization in training: the five loops of src/model/batch-norm-loops.ts, in the same
// order and precision, so both give the same bits (the JS loops are the reference; the test
// compares them). A tensor is seen as [outer, channels, inner]: element (o, c, i) is at
// (o * channels + c) * inner + i. Sums and the normalisation are in double (JS numbers); where
// the JS rounds to float32 (Math.fround, a store into a Float32Array), so does this.
//
// With the channels last (inner 1, the layout every conv and dense layer here writes), each
// loop runs over a row's channels, which the compiler vectorises without reordering any sum:
// channel c's sum still adds its values in row order. Built with -ffp-contract=off.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dnnl-context.h"

namespace tandem {
namespace {

struct Geometry {
  size_t outer, channels, inner;
  size_t size() const { return outer * channels * inner; }
};

Geometry ReadGeometry(const Napi::CallbackInfo& info, size_t at) {
  int o = Int(info[at], "outer"), c = Int(info[at + 1], "channels"), i = Int(info[at + 2], "inner");
  if (o < 0 || c < 1 || i < 0) throw Napi::RangeError::New(info.Env(), "need outer >= 0, channels >= 1, inner >= 0");
  return {static_cast<size_t>(o), static_cast<size_t>(c), static_cast<size_t>(i)};
}

double* F64(const Napi::Value& v, size_t need, const char* name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    throw Napi::TypeError::New(v.Env(), std::string(name) + " must be a Float64Array");
  auto a = v.As<Napi::Float64Array>();
  if (a.ElementLength() < need)
    throw Napi::RangeError::New(v.Env(), std::string(name) + " holds fewer values than the geometry needs");
  return a.Data();
}

// bnChannelMoments(x, outer, channels, inner = 1, sums: Float64Array[2C]), channels last: [Σx, Σx²] per channel, in
// double, in row order: both statistics in one pass over x (precision bf16: src/engine/batch-norm-loops.ts).
TANDEM_SIMD Napi::Value ChannelMoments(const Napi::CallbackInfo& info) {
  const Geometry g = ReadGeometry(info, 1);
  if (g.inner != 1) throw Napi::RangeError::New(info.Env(), "bnChannelMoments reads channels last: inner must be 1");
  const size_t C = g.channels;
  const float* x = F32(info[0], g.size(), "x");
  double* sums = F64(info[4], 2 * C, "sums");
  for (size_t k = 0; k < 2 * C; k++) sums[k] = 0;
  for (size_t r = 0; r < g.outer; r++) {
    const float* row = x + r * C;
    for (size_t k = 0; k < C; k++) {
      const double v = row[k];
      sums[k] += v;
      sums[C + k] += v * v;
    }
  }
  return info.Env().Undefined();
}

// bnChannelSums(x, outer, channels, inner, sums: Float64Array[C]): sums[c] = Σx over channel c.
TANDEM_SIMD Napi::Value ChannelSums(const Napi::CallbackInfo& info) {
  const Geometry g = ReadGeometry(info, 1);
  const float* x = F32(info[0], g.size(), "x");
  double* sums = F64(info[4], g.channels, "sums");
  for (size_t c = 0; c < g.channels; c++) sums[c] = 0;
  if (g.inner == 1) {
    for (size_t o = 0; o < g.outer; o++) {
      const float* row = x + o * g.channels;
      for (size_t c = 0; c < g.channels; c++) sums[c] += row[c];
    }
    return info.Env().Undefined();
  }
  for (size_t o = 0, i = 0; o < g.outer; o++) {
    for (size_t c = 0; c < g.channels; c++) {
      double s = 0;
      for (const size_t end = i + g.inner; i < end; i++) s += x[i];
      sums[c] += s;
    }
  }
  return info.Env().Undefined();
}

// dy times relu's derivative read from relu's output z, as reluGrad computes it from the input (z > 0 exactly where
// the input is, NaN where it is NaN): the gradient at a BatchNormalization whose relu is fused into it.
inline float ThroughRelu(float dy, float z) { return dy * ReluStep(z); }

// The optional relu output at info[at] (a Float32Array of `need` values), or nullptr.
const float* OptionalRelu(const Napi::CallbackInfo& info, size_t at, size_t need) {
  return info.Length() > at ? OptionalF32(info[at], need, "z") : nullptr;
}

// Each difference and square rounded to float32, as tfjs computes them.
inline float CenteredSquare(float x, float m) {
  const float d = static_cast<float>(static_cast<double>(x) - m);
  return static_cast<float>(static_cast<double>(d) * d);
}

// bnCenteredSquareSums(x, mean: F32[C], outer, channels, inner, sums: F64[C]): Σ(x − mean)².
TANDEM_SIMD Napi::Value CenteredSquareSums(const Napi::CallbackInfo& info) {
  const Geometry g = ReadGeometry(info, 2);
  const float* x = F32(info[0], g.size(), "x");
  const float* mean = F32(info[1], g.channels, "mean");
  double* sums = F64(info[5], g.channels, "sums");
  for (size_t c = 0; c < g.channels; c++) sums[c] = 0;
  if (g.inner == 1) {
    for (size_t o = 0; o < g.outer; o++) {
      const float* row = x + o * g.channels;
      for (size_t c = 0; c < g.channels; c++) sums[c] += CenteredSquare(row[c], mean[c]);
    }
    return info.Env().Undefined();
  }
  for (size_t o = 0, i = 0; o < g.outer; o++) {
    for (size_t c = 0; c < g.channels; c++) {
      const float m = mean[c];
      double s = 0;
      for (const size_t end = i + g.inner; i < end; i++) s += CenteredSquare(x[i], m);
      sums[c] += s;
    }
  }
  return info.Env().Undefined();
}

// bnNormalize(x, mean: F32, scale: F64, beta: F32, outer, channels, inner, y: F32, relu?):
// y = β + (x − mean)·scale, per channel; relu: y = relu(that), the relu layer after it fused in.
TANDEM_SIMD Napi::Value Normalize(const Napi::CallbackInfo& info) {
  const Geometry g = ReadGeometry(info, 4);
  const float* x = F32(info[0], g.size(), "x");
  const float* mean = F32(info[1], g.channels, "mean");
  const double* scale = F64(info[2], g.channels, "scale");
  const float* beta = F32(info[3], g.channels, "beta");
  float* y = F32(info[7], g.size(), "y");
  const bool relu = info.Length() > 8 && info[8].ToBoolean().Value();
  if (g.inner == 1) {
    for (size_t o = 0; o < g.outer; o++) {
      const float* row = x + o * g.channels;
      float* out = y + o * g.channels;
      if (relu)
        for (size_t c = 0; c < g.channels; c++)
          out[c] = ReluValue(static_cast<float>(static_cast<double>(beta[c]) + (row[c] - static_cast<double>(mean[c])) * scale[c]));
      else
        for (size_t c = 0; c < g.channels; c++)
          out[c] = static_cast<float>(static_cast<double>(beta[c]) + (row[c] - static_cast<double>(mean[c])) * scale[c]);
    }
    return info.Env().Undefined();
  }
  for (size_t o = 0, i = 0; o < g.outer; o++) {
    for (size_t c = 0; c < g.channels; c++) {
      const double m = mean[c], k = scale[c], b = beta[c];
      for (const size_t end = i + g.inner; i < end; i++) {
        const float v = static_cast<float>(b + (x[i] - m) * k);
        y[i] = relu ? ReluValue(v) : v;
      }
    }
  }
  return info.Env().Undefined();
}

// bnGradientSums(dy, x, mean: F32, invStd: F64, outer, channels, inner, sums: F64[2C], z?: F32):
// [Σdy, Σdy·x̂] per channel, x̂ = (x − mean)·invStd; with z (a fused relu's output), dy is relu's input gradient.
TANDEM_SIMD Napi::Value GradientSums(const Napi::CallbackInfo& info) {
  const Geometry g = ReadGeometry(info, 4);
  const size_t C = g.channels;
  const float* dy = F32(info[0], g.size(), "dy");
  const float* x = F32(info[1], g.size(), "x");
  const float* mean = F32(info[2], C, "mean");
  const double* invStd = F64(info[3], C, "invStd");
  double* sums = F64(info[7], 2 * C, "sums");
  const float* z = OptionalRelu(info, 8, g.size());
  for (size_t c = 0; c < 2 * C; c++) sums[c] = 0;
  if (g.inner == 1) {
    for (size_t o = 0; o < g.outer; o++) {
      const float *dyRow = dy + o * C, *xRow = x + o * C, *zRow = z ? z + o * C : nullptr;
      for (size_t c = 0; c < C; c++) {
        const double d = zRow ? ThroughRelu(dyRow[c], zRow[c]) : dyRow[c];
        sums[c] += d;
        sums[C + c] += d * (xRow[c] - static_cast<double>(mean[c])) * invStd[c];
      }
    }
    return info.Env().Undefined();
  }
  for (size_t o = 0, i = 0; o < g.outer; o++) {
    for (size_t c = 0; c < C; c++) {
      const double m = mean[c], k = invStd[c];
      double sDy = 0, sDyXHat = 0;
      for (const size_t end = i + g.inner; i < end; i++) {
        const double d = z ? ThroughRelu(dy[i], z[i]) : dy[i];
        sDy += d;
        sDyXHat += d * (x[i] - m) * k;
      }
      sums[c] += sDy;
      sums[C + c] += sDyXHat;
    }
  }
  return info.Env().Undefined();
}

// bnInputGradient(dy, x, mean: F32, invStd: F64, gamma: F32, sums: F32[2C], n, outer, channels,
// inner, dx: F32, z?: F32, dxShadow?): dx = γ·invStd·(dy − meanDy − x̂·meanDyXHat), the means over the batch of n
// (with z, dy through the fused relu first, as in bnGradientSums); dxShadow: dx in bf16.
TANDEM_SIMD Napi::Value InputGradient(const Napi::CallbackInfo& info) {
  const Geometry g = ReadGeometry(info, 7);
  const size_t C = g.channels;
  const float* dy = F32(info[0], g.size(), "dy");
  const float* x = F32(info[1], g.size(), "x");
  const float* mean = F32(info[2], C, "mean");
  const double* invStd = F64(info[3], C, "invStd");
  const float* gamma = F32(info[4], C, "gamma");
  const float* sums = F32(info[5], 2 * C, "sums");
  if (!info[6].IsNumber()) throw Napi::TypeError::New(info.Env(), "n must be a number");
  const double n = info[6].As<Napi::Number>().DoubleValue();
  float* dx = F32(info[10], g.size(), "dx");
  const float* z = OptionalRelu(info, 11, g.size());
  uint16_t* shadow = OptionalShadowOut(info, 12, g.size());
  if (g.inner == 1) {
    // The per-channel factors once (the same values the general loop computes per channel and row).
    std::vector<double> k(C), scale(C), meanDy(C), meanDyXHat(C), m(C);
    for (size_t c = 0; c < C; c++) {
      m[c] = mean[c];
      k[c] = invStd[c];
      scale[c] = gamma[c] * k[c];
      meanDy[c] = sums[c] / n;
      meanDyXHat[c] = sums[C + c] / n;
    }
    for (size_t from = 0, all = g.size(), block = ShadowBlock(all, C, shadow); from < all; from += block) {
      const size_t to = std::min(all, from + block);
      for (size_t o = from / C; o < to / C; o++) {
        const float *dyRow = dy + o * C, *xRow = x + o * C, *zRow = z ? z + o * C : nullptr;
        float* out = dx + o * C;
        if (zRow)
          for (size_t c = 0; c < C; c++) {
            const double d = ThroughRelu(dyRow[c], zRow[c]);
            out[c] = static_cast<float>(scale[c] * (d - meanDy[c] - (xRow[c] - m[c]) * k[c] * meanDyXHat[c]));
          }
        else
          for (size_t c = 0; c < C; c++)
            out[c] = static_cast<float>(scale[c] * (dyRow[c] - meanDy[c] - (xRow[c] - m[c]) * k[c] * meanDyXHat[c]));
      }
      if (shadow) CastToBf16(dx + from, shadow + from, to - from);
    }
    return info.Env().Undefined();
  }
  for (size_t o = 0, i = 0; o < g.outer; o++) {
    for (size_t c = 0; c < C; c++) {
      const double m = mean[c], k = invStd[c], scale = gamma[c] * k;
      const double meanDy = sums[c] / n, meanDyXHat = sums[C + c] / n;
      for (const size_t end = i + g.inner; i < end; i++) {
        const double d = z ? ThroughRelu(dy[i], z[i]) : dy[i];
        dx[i] = static_cast<float>(scale * (d - meanDy - (x[i] - m) * k * meanDyXHat));
      }
    }
  }
  if (shadow) CastToBf16(dx, shadow, g.size());
  return info.Env().Undefined();
}

}  // namespace

void RegisterBatchNorm(Napi::Env env, Napi::Object exports) {
  exports.Set("bnChannelSums", Napi::Function::New(env, ChannelSums));
  exports.Set("bnChannelMoments", Napi::Function::New(env, ChannelMoments));
  exports.Set("bnCenteredSquareSums", Napi::Function::New(env, CenteredSquareSums));
  exports.Set("bnNormalize", Napi::Function::New(env, Normalize));
  exports.Set("bnGradientSums", Napi::Function::New(env, GradientSums));
  exports.Set("bnInputGradient", Napi::Function::New(env, InputGradient));
}

}  // namespace tandem

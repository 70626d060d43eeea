// tandem's Gloo addon: one Gloo context (a full mesh of TCP pairs) per object, and
// the collectives on Float32Arrays (SharedArrayBuffer-backed too). Every call is
// synchronous for its caller (a rank's own comm or compute thread): it runs on the
// context's own thread (never libuv's pool) while the caller waits in slices of
// waitSliceMs, calling onWait (the thread's heartbeat for tandem's watchdog).
// A Gloo call cannot be interrupted (closing its pairs does not wake it): it ends
// with its result, a peer's failure or the timeout.
//
//   new GlooContext({ rank, size, store, prefix, hostname, timeoutMs, secret?, onWait?, waitSliceMs? })
//   connect()                           the rendezvous through the store; blocks
//     store: "tcp://host:port" (tandem's store, src/collectives/gloo/tcp-store-server.ts)
//            | "file:///shared/dir" (Gloo's FileStore)
//   allReduce(buf, 'sum' | 'max')       Gloo's ring all-reduce (not rank-ordered: see gloo-transport.ts)
//   allGather(mine, all) · allGatherV(mine, all, counts)   every receive posted first (gloo-pipelined.cc)
//   allToAllV(in, inCounts, out, outCounts)
//   allReducePipelined(buf, 'sum' | 'mean' | 'max', chunkFloats)   rank-ordered, pipelined (gloo-pipelined.cc)
//   exchangeV(in, inCounts, out, outCounts)   allToAllV with every receive posted first
//   broadcast(buf, root) · barrier() · close()
//
// Errors are JS Errors with `glooKind` ('timeout' | 'peer' | 'io' | 'invalid' | 'closed')
// and `peerRank` (the rank whose pair failed, -1 when Gloo's message names none).
#include <napi.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gloo-executor.h"
#include "gloo-pipelined.h"
#include "gloo-tcp-store.h"

namespace tandem_gloo {

constexpr size_t kAddressBytes = 64;

struct Options {
  int rank = 0, size = 1;
  std::string store, prefix, hostname;
  // The store's secret: the `secret` option (an in-process communicator's own), else TANDEM_JOB_SECRET, else none.
  std::string secret;
  std::chrono::milliseconds timeout{30000};
  std::chrono::milliseconds waitSlice{50};
};

std::unique_ptr<gloo::rendezvous::Store> OpenStore(const std::string& url, std::chrono::milliseconds timeout,
                                                   const std::string& secret) {
  if (url.rfind("file://", 0) == 0) return std::make_unique<gloo::rendezvous::FileStore>(url.substr(7));
  if (url.rfind("tcp://", 0) == 0) {
    auto hostPort = url.substr(6);
    auto colon = hostPort.rfind(':');
    if (colon == std::string::npos) GLOO_THROW_INVALID_OPERATION_EXCEPTION("store '", url, "' has no port");
    auto host = hostPort.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return std::make_unique<TcpStore>(host, std::stoi(hostPort.substr(colon + 1)), timeout, secret);
  }
  GLOO_THROW_INVALID_OPERATION_EXCEPTION("store '", url, "' is neither tcp://host:port nor file:///dir");
}

// out = max(a, b) as JavaScript's Math.max: NaN wins, +0 beats -0.
void MaxLikeJs(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(c);
  auto* x = static_cast<const float*>(a);
  auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; i++) {
    float u = x[i], v = y[i];
    if (std::isnan(u) || std::isnan(v)) o[i] = NAN;
    else if (u == v) o[i] = std::signbit(u) ? v : u;
    else o[i] = u > v ? u : v;
  }
}

class GlooContext : public Napi::ObjectWrap<GlooContext> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "GlooContext", {
      InstanceMethod("connect", &GlooContext::ConnectMethod), InstanceMethod("close", &GlooContext::Close),
      InstanceMethod("allReduce", &GlooContext::AllReduce), InstanceMethod("allGather", &GlooContext::AllGather),
      InstanceMethod("allGatherV", &GlooContext::AllGatherV), InstanceMethod("allToAllV", &GlooContext::AllToAllV),
      InstanceMethod("allReducePipelined", &GlooContext::AllReducePipelined), InstanceMethod("exchangeV", &GlooContext::ExchangeVMethod),
      InstanceMethod("broadcast", &GlooContext::Broadcast), InstanceMethod("barrier", &GlooContext::Barrier),
      InstanceAccessor("rank", &GlooContext::Rank, nullptr), InstanceAccessor("size", &GlooContext::Size, nullptr),
      InstanceAccessor("peers", &GlooContext::Peers, nullptr)});
  }

  explicit GlooContext(const Napi::CallbackInfo& info) : Napi::ObjectWrap<GlooContext>(info) {
    opts_ = ReadOptions(info[0]);
    auto onWait = info[0].As<Napi::Object>().Get("onWait");
    if (onWait.IsFunction()) onWait_ = Napi::Persistent(onWait.As<Napi::Function>());
    env_ = info.Env();
    napi_add_env_cleanup_hook(env_, &GlooContext::OnEnvCleanup, this);
    hooked_ = true;
  }

  ~GlooContext() override { Release(false); }

 private:
  Options opts_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::vector<std::string> peerAddresses_;  // [q]: how Gloo's messages name rank q's end of our pair
  std::unique_ptr<Executor> executor_;
  Napi::FunctionReference onWait_;
  napi_env env_ = nullptr;
  bool hooked_ = false;
  bool context_closed_ = false;
  std::vector<float> scratch_;  // the pipelined all-reduce's received copies
  uint64_t tag_ = 0;            // numbers tandem's own messages (every rank makes the same calls in the same order)

  static Options ReadOptions(const Napi::Value& v) {
    if (!v.IsObject()) throw Napi::TypeError::New(v.Env(), "GlooContext options must be an object");
    auto o = v.As<Napi::Object>();
    Options out;
    out.rank = o.Get("rank").As<Napi::Number>().Int32Value();
    out.size = o.Get("size").As<Napi::Number>().Int32Value();
    out.store = o.Get("store").As<Napi::String>().Utf8Value();
    out.prefix = o.Get("prefix").As<Napi::String>().Utf8Value();
    out.hostname = o.Get("hostname").As<Napi::String>().Utf8Value();
    out.timeout = std::chrono::milliseconds(o.Get("timeoutMs").As<Napi::Number>().Int64Value());
    if (o.Has("secret") && o.Get("secret").IsString()) {
      out.secret = o.Get("secret").As<Napi::String>().Utf8Value();
    } else if (const char* env = getenv("TANDEM_JOB_SECRET")) {
      out.secret = env;
    }
    if (out.size < 1 || out.rank < 0 || out.rank >= out.size)
      throw Napi::RangeError::New(v.Env(), "GlooContext: rank must be in [0, size)");
    if (out.timeout.count() <= 0) throw Napi::RangeError::New(v.Env(), "GlooContext: timeoutMs must be positive");
    if (o.Has("waitSliceMs")) out.waitSlice = std::chrono::milliseconds(std::max<int64_t>(1, o.Get("waitSliceMs").As<Napi::Number>().Int64Value()));
    return out;
  }

  // Rendezvous through the store, connect every pair, then learn how each peer's end is named.
  void Connect() {
    auto store = OpenStore(opts_.store, opts_.timeout, opts_.secret);
    gloo::rendezvous::PrefixStore prefixed(opts_.prefix, *store);
    gloo::transport::tcp::attr attr;
    attr.hostname = opts_.hostname;
    device_ = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(opts_.rank, opts_.size);
    context->setTimeout(opts_.timeout);
    context->connectFullMesh(prefixed, device_);
    context_ = context;
    ExchangeAddresses();
  }

  // Gloo names a failed pair by the peer's address for that pair: gather every rank's pair addresses.
  void ExchangeAddresses() {
    const int n = opts_.size;
    std::vector<char> mine(n * kAddressBytes, 0), all(n * n * kAddressBytes, 0);
    for (int q = 0; q < n; q++) {
      if (q == opts_.rank) continue;
      auto s = context_->getPair(q)->address().str();
      std::memcpy(&mine[q * kAddressBytes], s.data(), std::min(s.size(), kAddressBytes - 1));
    }
    gloo::AllgatherOptions o(context_);
    o.setInput(mine.data(), mine.size());
    o.setOutput(all.data(), all.size());
    gloo::allgather(o);
    peerAddresses_.assign(n, "");
    for (int q = 0; q < n; q++)
      if (q != opts_.rank) peerAddresses_[q] = std::string(&all[(q * n + opts_.rank) * kAddressBytes]);
  }

  // `hard`: Gloo's closeConnections (SO_LINGER 0: a reset, what is still in the socket's send buffer is dropped) for a
  // thread being torn down mid-call; otherwise the pairs close with the context (a FIN after every byte already
  // written: over a slow link a peer may still be receiving this rank's last message, and must get it).
  void Release(bool hard) {
    if (hooked_) { napi_remove_env_cleanup_hook(env_, &GlooContext::OnEnvCleanup, this); hooked_ = false; }
    if (context_) { if (hard) context_->closeConnections(); context_.reset(); }
    executor_.reset();  // idle here: the JS thread waits for every call it starts
    context_closed_ = true;
    device_.reset();
  }

  // The thread is ending (worker exit or terminate): close the pairs so the peers learn it now.
  static void OnEnvCleanup(void* self) {
    auto* c = static_cast<GlooContext*>(self);
    c->hooked_ = false;
    c->Release(true);
  }

  // Runs `op` on the executor, calling onWait every slice until it is done.
  std::exception_ptr RunWaiting(napi_env env, const std::function<void()>& op) {
    if (!executor_) executor_ = std::make_unique<Executor>();
    executor_->Start(op);
    bool call = !onWait_.IsEmpty();
    while (!executor_->WaitFor(opts_.waitSlice)) {
      if (!call) continue;
      napi_value fn, recv, result;
      // A failing call (the thread is ending, or onWait threw) stops the calls; the wait goes on:
      // the call's buffers must outlive it.
      call = napi_get_reference_value(env, onWait_, &fn) == napi_ok && napi_get_undefined(env, &recv) == napi_ok &&
             napi_call_function(env, recv, fn, 0, nullptr, &result) == napi_ok;
    }
    return executor_->Error();
  }

  // Runs `op`; a Gloo exception becomes a pending JS Error that names the peer rank. Never throws a C++
  // exception into N-API: the call may fail while the thread is being terminated (a peer closed its pairs
  // because of that), when no JavaScript can run and only returning quietly is safe.
  template <typename F>
  bool Guard(napi_env env, F op) {
    std::exception_ptr error = RunWaiting(env, op);
    if (!error) return true;
    try {
      std::rethrow_exception(error);
    } catch (const gloo::InvalidOperationException& e) {
      ThrowQuietly(env, e.what(), "invalid");
    } catch (const gloo::EnforceNotMet& e) {
      ThrowQuietly(env, e.what(), "invalid");
    } catch (const std::exception& e) {
      std::string m = e.what();
      bool timedOut = m.find("Timed out") != std::string::npos || m.find("timeout") != std::string::npos ||
                      m.find("was not set within") != std::string::npos || m.find("before the deadline") != std::string::npos;
      ThrowQuietly(env, m, timedOut ? "timeout" : "io");
    } catch (...) {
      ThrowQuietly(env, "unknown failure", "io");
    }
    return false;
  }

  void ThrowQuietly(napi_env env, const std::string& what, const char* kind) {
    int peer = -1;
    for (int q = 0; q < static_cast<int>(peerAddresses_.size()); q++)
      if (!peerAddresses_[q].empty() && what.find(peerAddresses_[q]) != std::string::npos) peer = q;
    if (peer < 0 && opts_.size == 2 && context_) peer = 1 - opts_.rank;  // the only peer there is
    std::string message = "gloo rank " + std::to_string(opts_.rank) + " of " + std::to_string(opts_.size) + ": ";
    if (peer >= 0 && !peerAddresses_.empty()) message += "peer rank " + std::to_string(peer) + " (" + peerAddresses_[peer] + "): ";
    message += what;
    bool peerGone = peer >= 0 && std::string(kind) == "io";
    napi_value msg, err, k, p;
    if (napi_create_string_utf8(env, message.c_str(), message.size(), &msg) != napi_ok) return;
    if (napi_create_error(env, nullptr, msg, &err) != napi_ok) return;
    if (napi_create_string_utf8(env, peerGone ? "peer" : kind, NAPI_AUTO_LENGTH, &k) == napi_ok) napi_set_named_property(env, err, "glooKind", k);
    if (napi_create_int32(env, peer, &p) == napi_ok) napi_set_named_property(env, err, "peerRank", p);
    napi_throw(env, err);
  }

  // The live context, or nullptr with a pending 'closed' error.
  std::shared_ptr<gloo::rendezvous::Context> Live(napi_env env) {
    if (!context_) ThrowQuietly(env, context_closed_ ? "the context is closed" : "the context is not connected", "closed");
    return context_;
  }

  static Napi::Float32Array F32(const Napi::Value& v, const char* name) {
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
      throw Napi::TypeError::New(v.Env(), std::string(name) + " must be a Float32Array");
    return v.As<Napi::Float32Array>();
  }

  template <typename T>
  static std::vector<T> Counts(const Napi::Value& v, size_t size, const char* name) {
    if (!v.IsArray() || v.As<Napi::Array>().Length() != size)
      throw Napi::TypeError::New(v.Env(), std::string(name) + " must be an array of one count per rank");
    auto a = v.As<Napi::Array>();
    std::vector<T> out(size);
    for (uint32_t i = 0; i < size; i++) out[i] = static_cast<T>(a.Get(i).As<Napi::Number>().Int64Value());
    return out;
  }

  static size_t Total(const std::vector<int64_t>& c) { size_t s = 0; for (auto x : c) s += x; return s; }

  void AllReduce(const Napi::CallbackInfo& info) {
    auto buf = F32(info[0], "buf");
    auto op = info[1].As<Napi::String>().Utf8Value();
    if (op != "sum" && op != "max") throw Napi::TypeError::New(info.Env(), "op must be 'sum' or 'max'");
    if (buf.ElementLength() == 0) return;
    auto context = Live(info.Env());
    if (!context) return;
    Guard(info.Env(), [&] {
      gloo::AllreduceOptions o(context);
      o.setOutput(buf.Data(), buf.ElementLength());
      if (op == "sum") o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      else o.setReduceFunction(&MaxLikeJs);
      gloo::allreduce(o);
    });
  }

  void AllGather(const Napi::CallbackInfo& info) {
    auto mine = F32(info[0], "mine");
    auto all = F32(info[1], "all");
    if (all.ElementLength() != mine.ElementLength() * opts_.size)
      throw Napi::RangeError::New(info.Env(), "allGather: all must hold size * mine.length floats");
    if (mine.ElementLength() == 0) return;
    auto context = Live(info.Env());
    if (!context) return;
    std::vector<size_t> counts(opts_.size, mine.ElementLength());
    Guard(info.Env(), [&] { tandem_gloo::AllGatherV(context, mine.Data(), all.Data(), counts, tag_, opts_.timeout); });
  }

  void AllGatherV(const Napi::CallbackInfo& info) {
    auto mine = F32(info[0], "mine");
    auto all = F32(info[1], "all");
    auto counts = Counts<size_t>(info[2], opts_.size, "counts");
    size_t total = 0;
    for (auto c : counts) total += c;
    if (counts[opts_.rank] != mine.ElementLength() || total != all.ElementLength())
      throw Napi::RangeError::New(info.Env(), "allGatherV: counts must give mine.length for this rank and sum to all.length");
    if (total == 0) return;
    auto context = Live(info.Env());
    if (!context) return;
    Guard(info.Env(), [&] { tandem_gloo::AllGatherV(context, mine.Data(), all.Data(), counts, tag_, opts_.timeout); });
  }

  void AllToAllV(const Napi::CallbackInfo& info) {
    auto in = F32(info[0], "input");
    auto inCounts = Counts<int64_t>(info[1], opts_.size, "inCounts");
    auto out = F32(info[2], "output");
    auto outCounts = Counts<int64_t>(info[3], opts_.size, "outCounts");
    if (Total(inCounts) != in.ElementLength() || Total(outCounts) != out.ElementLength())
      throw Napi::RangeError::New(info.Env(), "allToAllV: counts must sum to the input and output lengths");
    auto context = Live(info.Env());
    if (!context) return;
    Guard(info.Env(), [&] {
      gloo::AlltoallvOptions o(context);
      o.setInput(in.Data(), inCounts);
      o.setOutput(out.Data(), outCounts);
      gloo::alltoallv(o);
    });
  }

  void AllReducePipelined(const Napi::CallbackInfo& info) {
    auto buf = F32(info[0], "buf");
    auto name = info[1].As<Napi::String>().Utf8Value();
    if (name != "sum" && name != "mean" && name != "max") throw Napi::TypeError::New(info.Env(), "op must be 'sum', 'mean' or 'max'");
    auto op = name == "sum" ? ReduceKind::kSum : name == "mean" ? ReduceKind::kMean : ReduceKind::kMax;
    int64_t chunkFloats = info[2].As<Napi::Number>().Int64Value();
    if (chunkFloats < 1) throw Napi::RangeError::New(info.Env(), "allReducePipelined: chunkFloats must be positive");
    if (buf.ElementLength() == 0) return;
    auto context = Live(info.Env());
    if (!context) return;
    Guard(info.Env(), [&] {
      PipelinedAllReduce(context, buf.Data(), buf.ElementLength(), op, static_cast<size_t>(chunkFloats), scratch_, tag_, opts_.timeout);
    });
  }

  void ExchangeVMethod(const Napi::CallbackInfo& info) {
    auto in = F32(info[0], "input");
    auto inCounts = Counts<int64_t>(info[1], opts_.size, "inCounts");
    auto out = F32(info[2], "output");
    auto outCounts = Counts<int64_t>(info[3], opts_.size, "outCounts");
    if (Total(inCounts) != in.ElementLength() || Total(outCounts) != out.ElementLength())
      throw Napi::RangeError::New(info.Env(), "exchangeV: counts must sum to the input and output lengths");
    auto context = Live(info.Env());
    if (!context) return;
    Guard(info.Env(), [&] { ExchangeV(context, in.Data(), inCounts, out.Data(), outCounts, tag_, opts_.timeout); });
  }

  void Broadcast(const Napi::CallbackInfo& info) {
    auto buf = F32(info[0], "buf");
    int root = info[1].As<Napi::Number>().Int32Value();
    if (root < 0 || root >= opts_.size) throw Napi::RangeError::New(info.Env(), "broadcast: root must be in [0, size)");
    if (buf.ElementLength() == 0) return;
    auto context = Live(info.Env());
    if (!context) return;
    Guard(info.Env(), [&] {
      gloo::BroadcastOptions o(context);
      o.setOutput(buf.Data(), buf.ElementLength());
      o.setRoot(root);
      gloo::broadcast(o);
    });
  }

  void Barrier(const Napi::CallbackInfo& info) {
    auto context = Live(info.Env());
    if (!context) return;
    Guard(info.Env(), [&] {
      gloo::BarrierOptions o(context);
      gloo::barrier(o);
    });
  }

  void ConnectMethod(const Napi::CallbackInfo& info) {
    if (context_ || context_closed_) {
      ThrowQuietly(info.Env(), context_ ? "connect: already connected" : "connect: the context is closed", "invalid");
      return;
    }
    if (!Guard(info.Env(), [&] { Connect(); })) Release(true);
  }

  void Close(const Napi::CallbackInfo&) { Release(false); }

  Napi::Value Rank(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), opts_.rank); }
  Napi::Value Size(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), opts_.size); }
  Napi::Value Peers(const Napi::CallbackInfo& info) {
    auto a = Napi::Array::New(info.Env(), peerAddresses_.size());
    for (uint32_t q = 0; q < peerAddresses_.size(); q++) a.Set(q, Napi::String::New(info.Env(), peerAddresses_[q]));
    return a;
  }
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("GlooContext", GlooContext::Define(env));
  exports.Set("version", Napi::String::New(env, "tandem-gloo 1"));
  return exports;
}

}  // namespace tandem_gloo

static Napi::Object InitGloo(Napi::Env env, Napi::Object exports) { return tandem_gloo::Init(env, exports); }

NODE_API_MODULE(tandem_gloo, InitGloo)

// tandem_shm: a POSIX shared-memory segment mapped into this process and shown
// to JavaScript as a SharedArrayBuffer over the mapping (V8's external backing
// stores; every worker thread the buffer is posted to sees the same pages), and
// a cross-process wait/wake on a 32-bit word of it (a futex without
// FUTEX_PRIVATE_FLAG: Atomics.wait wakes only inside one process). Waits are
// bounded; `alive` tells whether a peer's process still runs (a zombie does not).
#include <node.h>
#include <v8.h>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/futex.h>
#include <string>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

using v8::FunctionCallbackInfo;
using v8::Isolate;
using v8::Local;
using v8::SharedArrayBuffer;
using v8::Value;

void Throw(Isolate* isolate, const std::string& message) {
  isolate->ThrowException(v8::Exception::Error(v8::String::NewFromUtf8(isolate, message.c_str()).ToLocalChecked()));
}

std::string Name(Isolate* isolate, Local<Value> v) {
  v8::String::Utf8Value s(isolate, v);
  return *s ? std::string(*s) : std::string();
}

void Unmap(void* data, size_t length, void*) { munmap(data, length); }

// Maps `fd` (bytes long) and returns a SharedArrayBuffer over it; the mapping lives as long as any buffer on it.
bool Wrap(const FunctionCallbackInfo<Value>& info, int fd, size_t bytes, const std::string& name) {
  Isolate* isolate = info.GetIsolate();
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (data == MAP_FAILED) { Throw(isolate, "mmap of shared memory '" + name + "' failed: " + strerror(err)); return false; }
  std::shared_ptr<v8::BackingStore> store = SharedArrayBuffer::NewBackingStore(data, bytes, Unmap, nullptr);
  info.GetReturnValue().Set(SharedArrayBuffer::New(isolate, std::move(store)));
  return true;
}

// create(name, bytes): a new segment (O_EXCL: a name in use is an error), zero-filled, mapped.
void Create(const FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  std::string name = Name(isolate, info[0]);
  size_t bytes = static_cast<size_t>(info[1].As<v8::Number>()->Value());
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) { Throw(isolate, "shm_open('" + name + "', create) failed: " + strerror(errno)); return; }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    Throw(isolate, "ftruncate of shared memory '" + name + "' to " + std::to_string(bytes) + " bytes failed: " + strerror(err) +
      " (is /dev/shm large enough?)");
    return;
  }
  // Reserve the pages now: a tmpfs too small fails here (ENOSPC) instead of a SIGBUS at the first touch of a page.
  int reserved = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (reserved != 0) {
    close(fd);
    shm_unlink(name.c_str());
    Throw(isolate, "shared memory '" + name + "' cannot hold " + std::to_string(bytes) + " bytes: " + strerror(reserved) +
      " (/dev/shm too small? see df /dev/shm; docker: --shm-size)");
    return;
  }
  Wrap(info, fd, bytes, name);
}

// open(name, bytes): the segment mapped, or null while it does not exist yet or is still smaller than `bytes`.
void Open(const FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  std::string name = Name(isolate, info[0]);
  size_t bytes = static_cast<size_t>(info[1].As<v8::Number>()->Value());
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    if (errno == ENOENT) { info.GetReturnValue().SetNull(); return; }
    Throw(isolate, "shm_open('" + name + "') failed: " + strerror(errno));
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) { close(fd); info.GetReturnValue().SetNull(); return; }
  Wrap(info, fd, bytes, name);
}

// unlink(name): true when removed, false when it was not there.
void Unlink(const FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  std::string name = Name(isolate, info[0]);
  if (shm_unlink(name.c_str()) == 0) { info.GetReturnValue().Set(true); return; }
  if (errno == ENOENT) { info.GetReturnValue().Set(false); return; }
  Throw(isolate, "shm_unlink('" + name + "') failed: " + strerror(errno));
}

int* Word(const FunctionCallbackInfo<Value>& info) {
  Local<SharedArrayBuffer> sab = info[0].As<SharedArrayBuffer>();
  size_t offset = static_cast<size_t>(info[1].As<v8::Number>()->Value());
  return reinterpret_cast<int*>(static_cast<char*>(sab->Data()) + offset);
}

// wait(sab, byteOffset, expected, timeoutMs): 0 woken (or spurious), 1 timed out, 2 the word was not `expected`.
void Wait(const FunctionCallbackInfo<Value>& info) {
  int* word = Word(info);
  int expected = info[2].As<v8::Int32>()->Value();
  double ms = info[3].As<v8::Number>()->Value();
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ms / 1000);
  ts.tv_nsec = static_cast<long>((ms - ts.tv_sec * 1000.0) * 1e6);
  long r = syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
  int code = 0;
  if (r != 0) code = errno == ETIMEDOUT ? 1 : errno == EAGAIN ? 2 : 0;
  info.GetReturnValue().Set(code);
}

// wake(sab, byteOffset): wakes every waiter on the word, in any process; returns how many.
void Wake(const FunctionCallbackInfo<Value>& info) {
  long r = syscall(SYS_futex, Word(info), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  info.GetReturnValue().Set(static_cast<int>(r < 0 ? 0 : r));
}

// alive(pid): whether the process exists and is not a zombie.
void Alive(const FunctionCallbackInfo<Value>& info) {
  int pid = info[0].As<v8::Int32>()->Value();
  bool alive = pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
  if (alive) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE* f = fopen(path, "r");
    if (f) {
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = 0;
      const char* close = strrchr(buf, ')');
      if (close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X')) alive = false;
    }
  }
  info.GetReturnValue().Set(alive);
}

// flock(fd): an exclusive, non-blocking flock(2) on an open file (src/output/kernel-lock.ts, the run lock): 0 when
// taken, 1 when another open file holds it, else -errno. The kernel drops it when the last descriptor of the open
// file closes: at the holder's death too, kill -9 included.
void Flock(const FunctionCallbackInfo<Value>& info) {
  int fd = info[0].As<v8::Int32>()->Value();
  int r;
  do r = flock(fd, LOCK_EX | LOCK_NB); while (r != 0 && errno == EINTR);
  info.GetReturnValue().Set(r == 0 ? 0 : errno == EWOULDBLOCK ? 1 : -errno);
}

}  // namespace

NODE_MODULE_INIT(/* exports, module, context */) {
  NODE_SET_METHOD(exports, "create", Create);
  NODE_SET_METHOD(exports, "open", Open);
  NODE_SET_METHOD(exports, "unlink", Unlink);
  NODE_SET_METHOD(exports, "wait", Wait);
  NODE_SET_METHOD(exports, "wake", Wake);
  NODE_SET_METHOD(exports, "alive", Alive);
  NODE_SET_METHOD(exports, "flock", Flock);
  Isolate* isolate = context->GetIsolate();
  exports->Set(context, v8::String::NewFromUtf8Literal(isolate, "version"), v8::String::NewFromUtf8Literal(isolate, "1")).Check();
}

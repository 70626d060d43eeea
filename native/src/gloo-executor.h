// A Gloo context's own thread (not libuv's pool): runs one call at a time while
// the calling JS thread waits for it in slices (see GlooContext::RunWaiting).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace tandem_gloo {

// The context's own thread (not libuv's pool): runs one Gloo call at a time while the
// calling JS thread waits for it in slices, calling its onWait (the thread's heartbeat).
class Executor {
 public:
  Executor() : thread_([this] { Loop(); }) {}
  ~Executor() {
    { std::lock_guard<std::mutex> lock(mu_); stop_ = true; }
    cv_.notify_all();
    thread_.join();
  }
  void Start(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    done_ = false;
    error_ = nullptr;
    cv_.notify_all();
  }
  bool WaitFor(std::chrono::milliseconds ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, ms, [&] { return done_; });
  }
  std::exception_ptr Error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || job_; });
        if (!job_) return;
        job = std::move(job_);
        job_ = nullptr;
      }
      std::exception_ptr error;
      try { job(); } catch (...) { error = std::current_exception(); }
      { std::lock_guard<std::mutex> lock(mu_); error_ = error; done_ = true; }
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool done_ = true, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace tandem_gloo

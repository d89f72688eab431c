// The communication thread: a one-slot queue of packaged tasks.
#include "comm/comm_thread.h"

namespace diloco::comm {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::future<void> CommThread::submit(std::function<void()> job) {
  std::packaged_task<void()> task(std::move(job));
  auto done = task.get_future();
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [this] { return !has_next_; });
  next_ = std::move(task);
  has_next_ = true;
  lock.unlock();
  wake_.notify_all();
  return done;
}

void CommThread::loop() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return has_next_ || stop_; });
      if (!has_next_) return;  // stopping with nothing queued
      task = std::move(next_);
      has_next_ = false;
    }
    wake_.notify_all();
    task();  // exceptions land in the task's future
  }
}

}  // namespace diloco::comm

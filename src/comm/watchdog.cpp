// Watchdog thread: heartbeats by file, and a deadline on every marked wait.
#include "comm/watchdog.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace diloco::comm {
namespace {

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Watchdog::Watchdog(double timeout_s, std::string heartbeat_dir, int world_rank, int world_size,
                   std::function<std::string(int)> describe)
    : timeout_ms_(static_cast<long long>(timeout_s * 1000)),
      dir_(std::move(heartbeat_dir)),
      rank_(world_rank),
      size_(world_size),
      describe_(std::move(describe)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  beat();
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Watchdog::Guard::Guard(Watchdog* dog, const char* what) : dog_(dog) {
  if (!dog_) return;
  for (int i = 0; i < kSlots; ++i) {
    Slot& slot = dog_->slots_[i];
    if (slot.taken.exchange(true)) continue;
    // The start time goes in before the name: the watchdog times a slot only
    // while it has a name, and a stale start could end the job at once.
    slot.since_ms.store(now_ms());
    slot.waiting_on.store(what);
    slot_ = i;
    return;
  }
  throw std::logic_error(std::string("watchdog: more than ") + std::to_string(kSlots) +
                         " concurrent waits; cannot time " + what);
}

Watchdog::Guard::~Guard() {
  if (!dog_ || slot_ < 0) return;
  dog_->slots_[slot_].waiting_on.store(nullptr);
  dog_->slots_[slot_].taken.store(false);
}

void Watchdog::beat() {
  // The file's modification time is the heartbeat.
  std::ofstream(dir_ + "/rank-" + std::to_string(rank_), std::ios::trunc) << ::getpid() << "\n";
}

std::string Watchdog::stale_ranks(double stale_s) const {
  std::string out;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    std::error_code ec;
    const auto when = std::filesystem::last_write_time(dir_ + "/rank-" + std::to_string(r), ec);
    const double age = ec ? -1.0 : std::chrono::duration<double>(now - when).count();
    if (ec || age > stale_s) {
      char buf[160];
      if (ec) std::snprintf(buf, sizeof(buf), "rank %d (%s): no heartbeat", r, describe_(r).c_str());
      else std::snprintf(buf, sizeof(buf), "rank %d (%s): last heartbeat %.1f s ago", r, describe_(r).c_str(), age);
      out += (out.empty() ? "" : "; ") + std::string(buf);
    }
  }
  return out;
}

void Watchdog::expire(const char* what, double waited_s) {
  const std::string stale = stale_ranks(3.0);
  std::fprintf(stderr,
               "diloco: rank %d (%s): no answer from peers for %.1f s in %s (sync.timeout_s); %s. Ending the job.\n",
               rank_, describe_(rank_).c_str(), waited_s, what,
               stale.empty() ? "no peer's heartbeat is stale: one is stuck elsewhere, or the job is already ending"
                             : ("lost: " + stale).c_str());
  std::fflush(stderr);
  // mpirun (or srun) tears the rest of the job down when a rank exits like this.
  std::_Exit(3);
}

void Watchdog::loop() {
  long long last_beat = now_ms();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_) break;
    const long long now = now_ms();
    if (now - last_beat >= 500) {
      beat();
      last_beat = now;
    }
    for (const Slot& slot : slots_) {
      const char* what = slot.waiting_on.load();
      const long long waited = now - slot.since_ms.load();
      if (what && waited > timeout_ms_.load()) expire(what, static_cast<double>(waited) / 1000.0);
    }
  }
}

}  // namespace diloco::comm

// A TensorBoard event file for one run folder, as TensorBoard's own
// SummaryWriter keeps it: scalars by slash-grouped tag ("loss/train",
// "site/site-1/H") and step, appended as framed Event records.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace diloco::metrics {

using Scalars = std::vector<std::pair<std::string, double>>;

class EventWriter {
 public:
  // Creates `dir` and a new file events.out.tfevents.SECONDS.HOST in it,
  // starting with the file-version record; throws std::runtime_error
  // naming the file if it cannot be written. Records are written out with
  // the first one added `flush_every_s` or more after the last write (an
  // inner step adds one per step), and at close.
  explicit EventWriter(const std::string& dir, double flush_every_s = 2.0);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One Event at `step` holding every finite value of `scalars` (a
  // non-finite one, which TensorBoard cannot chart, is left out).
  void add_scalars(std::int64_t step, const Scalars& scalars);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);

  std::string path_;
  std::ofstream out_;
  std::string pending_;
  double flush_every_s_;
  std::chrono::steady_clock::time_point last_flush_;
};

}  // namespace diloco::metrics

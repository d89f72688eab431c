// Event records from the protoc-generated TensorBoard messages, framed as
// TFRecords and buffered between flushes so a step never waits on the disk.
#include "metrics/event_writer.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "metrics/tensorboard.pb.h"
#include "metrics/tfrecord.h"

namespace diloco::metrics {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

EventWriter::EventWriter(const std::string& dir, double flush_every_s)
    : flush_every_s_(flush_every_s), last_flush_(std::chrono::steady_clock::now()) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const double now = unix_seconds();
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<long long>(now)) + "." + host_name();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw std::runtime_error("cannot write TensorBoard events to " + path_);
  tensorboard::Event first;
  first.set_wall_time(now);
  first.set_file_version("brain.Event:2");
  first.mutable_source_metadata()->set_writer("diloco");
  write_event(first.SerializeAsString());
  flush();
}

EventWriter::~EventWriter() {
  try {
    flush();
  } catch (const std::exception&) {
    // A destructor cannot report it; the last flush that failed already did.
  }
}

void EventWriter::add_scalars(std::int64_t step, const Scalars& scalars) {
  tensorboard::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    if (!std::isfinite(value)) continue;
    auto* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  if (event.summary().value_size() == 0) return;
  write_event(event.SerializeAsString());
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_flush_).count() >= flush_every_s_) flush();
}

void EventWriter::write_event(const std::string& event) { append_record(pending_, event); }

void EventWriter::flush() {
  last_flush_ = std::chrono::steady_clock::now();
  if (pending_.empty()) return;
  out_.write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  out_.flush();
  pending_.clear();
  if (!out_) throw std::runtime_error("cannot write TensorBoard events to " + path_);
}

}  // namespace diloco::metrics

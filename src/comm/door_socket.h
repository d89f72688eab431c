// The door's channel: a plain TCP connection between a group's door keeper
// and a site knocking on it, carrying length-prefixed frames. Unlike MPI's
// connect and accept it can be timed, cancelled and retried, so the whole
// join handshake runs on it and MPI's untimed accept is entered only once
// both sides have proved they are alive and ready (docs/membership.md).
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace diloco::comm {

// One end of a door connection; closes its socket when destroyed.
class DoorSocket {
 public:
  DoorSocket() = default;
  explicit DoorSocket(int fd) : fd_(fd) {}
  ~DoorSocket();
  DoorSocket(DoorSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DoorSocket& operator=(DoorSocket&& other) noexcept;
  DoorSocket(const DoorSocket&) = delete;
  DoorSocket& operator=(const DoorSocket&) = delete;

  bool open() const { return fd_ >= 0; }
  void close();

  // Connects to the first of `endpoint`'s addresses that answers
  // ("ADDR[,ADDR...]:PORT"), each within `timeout_s`; closed when none does.
  static DoorSocket connect(const std::string& endpoint, double timeout_s);

  // One frame (at most kMaxFrame bytes). False when the peer is gone.
  bool send(const std::string& frame);
  // Waits up to `timeout_s` for a frame; false on timeout, a closed or
  // broken connection, an oversized frame, or `cancel` set meanwhile.
  // `closed` (when given) tells a peer that went away from a timeout.
  bool receive(std::string& frame, double timeout_s, const std::atomic<bool>* cancel = nullptr,
               bool* closed = nullptr);

  // Whether the peer has closed its end (or the connection broke): seen at
  // once, where a send to a dead peer may still succeed once.
  bool peer_gone() const;

  static constexpr std::size_t kMaxFrame = 1 << 16;

 private:
  int fd_ = -1;
};

// A listening socket on every interface, on a port the kernel picks.
class DoorListener {
 public:
  DoorListener();  // throws std::runtime_error when no socket can be opened
  ~DoorListener();
  DoorListener(const DoorListener&) = delete;
  DoorListener& operator=(const DoorListener&) = delete;

  // "ADDR[,ADDR...]:PORT": this host's IPv4 addresses (loopback last), what
  // a knocking site tries in order.
  const std::string& endpoint() const { return endpoint_; }
  // A connection, or a closed socket when none arrives within `timeout_s`.
  DoorSocket accept(double timeout_s);

 private:
  int fd_ = -1;
  std::string endpoint_;
};

}  // namespace diloco::comm

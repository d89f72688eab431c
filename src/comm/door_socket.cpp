// TCP frames for the door (see door_socket.h): non-blocking connects and
// poll() for every wait, so nothing here waits without a bound.
#include "comm/door_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace diloco::comm {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point end) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits for `events` on `fd` until `end`, a slice at a time so `cancel` is
// seen; true when ready.
bool wait_for(int fd, short events, Clock::time_point end, const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancel && cancel->load()) return false;
    pollfd p{fd, events, 0};
    const int slice = std::min(remaining_ms(end), 100);
    const int rc = ::poll(&p, 1, slice);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
    if (Clock::now() >= end) return false;
  }
}

int connect_one(const std::string& address, int port, double timeout_s) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  int error = 0;
  socklen_t len = sizeof error;
  if (!wait_for(fd, POLLOUT, after(timeout_s), nullptr) ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

DoorSocket::~DoorSocket() { close(); }

DoorSocket& DoorSocket::operator=(DoorSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void DoorSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

DoorSocket DoorSocket::connect(const std::string& endpoint, double timeout_s) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) return DoorSocket();
  int port = 0;
  try {
    port = std::stoi(endpoint.substr(colon + 1));
  } catch (const std::exception&) {
    return DoorSocket();
  }
  if (port <= 0 || port > 65535) return DoorSocket();
  std::size_t at = 0;
  while (at < colon) {
    const auto comma = std::min(endpoint.find(',', at), colon);
    const int fd = connect_one(endpoint.substr(at, comma - at), port, timeout_s);
    if (fd >= 0) return DoorSocket(fd);
    at = comma + 1;
  }
  return DoorSocket();
}

bool DoorSocket::send(const std::string& frame) {
  if (fd_ < 0 || frame.size() > kMaxFrame) return false;
  std::string bytes(4, '\0');
  const auto n = static_cast<std::uint32_t>(frame.size());
  std::memcpy(bytes.data(), &n, 4);
  bytes += frame;
  std::size_t sent = 0;
  const auto end = after(5.0);  // a frame is small: a peer that takes no bytes for 5 s is gone
  while (sent < bytes.size()) {
    const auto rc = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (rc > 0) {
      sent += static_cast<std::size_t>(rc);
      continue;
    }
    if (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (!wait_for(fd_, POLLOUT, end, nullptr)) return false;
  }
  return true;
}

bool DoorSocket::receive(std::string& frame, double timeout_s, const std::atomic<bool>* cancel, bool* closed) {
  if (closed) *closed = fd_ < 0;
  if (fd_ < 0) return false;
  const auto end = after(timeout_s);
  std::string bytes;
  std::size_t want = 4;
  while (bytes.size() < want) {
    if (!wait_for(fd_, POLLIN, end, cancel)) return false;
    char buf[4096];
    const auto rc = ::recv(fd_, buf, std::min(sizeof buf, want - bytes.size()), 0);
    if (rc == 0 || (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      if (closed) *closed = true;
      return false;
    }
    if (rc > 0) bytes.append(buf, static_cast<std::size_t>(rc));
    if (want == 4 && bytes.size() == 4) {
      std::uint32_t n = 0;
      std::memcpy(&n, bytes.data(), 4);
      if (n > kMaxFrame) {
        if (closed) *closed = true;
        return false;
      }
      want = 4 + n;
    }
  }
  frame = bytes.substr(4);
  return true;
}

bool DoorSocket::peer_gone() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char byte;
  return ::recv(fd_, &byte, 1, MSG_PEEK) == 0;
}

DoorListener::DoorListener() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("cannot open the door's socket: ") + std::strerror(errno));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof any;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 || ::listen(fd_, 16) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&any), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("cannot listen on the door's socket: " + why);
  }
  std::string external, loopback;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {0};
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
      std::string& into = std::strncmp(text, "127.", 4) == 0 ? loopback : external;
      into += (into.empty() ? "" : ",") + std::string(text);
    }
    ::freeifaddrs(list);
  }
  std::string addresses = external;
  if (!loopback.empty()) addresses += (addresses.empty() ? "" : ",") + loopback;
  if (addresses.empty()) addresses = "127.0.0.1";
  endpoint_ = addresses + ":" + std::to_string(ntohs(any.sin_port));
}

DoorListener::~DoorListener() {
  if (fd_ >= 0) ::close(fd_);
}

DoorSocket DoorListener::accept(double timeout_s) {
  if (!wait_for(fd_, POLLIN, after(timeout_s), nullptr)) return DoorSocket();
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return DoorSocket();
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return DoorSocket(fd);
}

}  // namespace diloco::comm

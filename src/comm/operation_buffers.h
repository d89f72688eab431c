// Buffers of one MPI operation between sites launched apart.
//
// A wait with a deadline that gives up (PeerLost) leaves its operation with
// the transport: MPI has no way to take back a send, nor a receive already
// matched. When the lost peer wakes (a SIGSTOP'd leader resumed, a link that
// came back), the transport goes on reading from those buffers and writing
// into them, inside whatever MPI call this process makes next. Were they the
// caller's, freed or reused by then, that is a read of unmapped memory or a
// write into live data. So such operations work on buffers of their own, and
// when one is left by an exception its buffers are kept for the rest of the
// process instead of being freed.
#pragma once

#include <cstddef>
#include <deque>
#include <span>
#include <vector>

namespace diloco::comm {

class OperationBuffers {
 public:
  OperationBuffers();
  // Left normally: the buffers are freed. Left by an exception: they are
  // handed to a list that lives until the process ends.
  ~OperationBuffers();
  OperationBuffers(const OperationBuffers&) = delete;
  OperationBuffers& operator=(const OperationBuffers&) = delete;

  // A zeroed buffer of `bytes`, valid until this object is gone (or forever).
  std::span<std::byte> make(std::size_t bytes);
  // A copy of `from` in a buffer of this operation.
  std::span<std::byte> copy(std::span<const std::byte> from);
  template <class T>
  std::span<T> make_of(std::size_t count) {
    auto bytes = make(count * sizeof(T));
    return {reinterpret_cast<T*>(bytes.data()), count};  // new[]'s alignment suits any T
  }
  template <class T>
  std::span<T> copy_of(std::span<const T> from) {
    auto bytes = copy(std::as_bytes(from));
    return {reinterpret_cast<T*>(bytes.data()), from.size()};
  }

  // How many bytes the process keeps for operations given up (for tests).
  static std::size_t kept_bytes();

 private:
  int exceptions_;
  std::deque<std::vector<std::byte>> buffers_;  // a deque: adding one moves no other
};

}  // namespace diloco::comm

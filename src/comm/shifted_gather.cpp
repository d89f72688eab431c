// An all-gather as n - 1 shifts of send_recv (see shifted_gather.h).
#include "comm/shifted_gather.h"

namespace diloco::comm {

std::vector<std::vector<std::byte>> shifted_all_gather(Communicator& comm, std::span<const std::byte> mine, int tag) {
  const int n = comm.size();
  const int me = comm.rank();
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(n));
  all[static_cast<std::size_t>(me)].assign(mine.begin(), mine.end());
  for (int j = 1; j < n; ++j) {
    const int to = (me + j) % n;
    const int from = (me - j + n) % n;
    all[static_cast<std::size_t>(from)] = comm.send_recv(mine, to, from, tag + j - 1);
  }
  return all;
}

}  // namespace diloco::comm

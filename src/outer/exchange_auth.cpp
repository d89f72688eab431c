// The key's part of an exchange: what each message's tag covers, sealing and
// checking it, and the agreement on whose messages failed (exchange.h).
#include <string>

#include "outer/exchange.h"

namespace diloco::outer {

std::string Exchange::context(const char* kind, std::size_t part, int sender) const {
  return std::string("diloco-") + kind + ":" + std::to_string(epoch_) + ":" + std::to_string(round_) + ":" +
         std::to_string(part) + ":" + std::to_string(sender) + ":";
}

void Exchange::seal(std::vector<std::byte>& message, const char* kind, std::size_t part) const {
  if (!options_.auth) return;
  options_.auth->seal(context(kind, part, leaders_.rank()), message);
  if (round_ == options_.forge_round && std::string(kind) == "payload")  // test-only: a tag made without the key
    for (auto b = message.end() - sizeof(comm::MacTag); b != message.end(); ++b) *b = ~*b;
}

bool Exchange::unseal(std::vector<std::byte>& message, const char* kind, std::size_t part, int sender) const {
  return !options_.auth || options_.auth->unseal(context(kind, part, sender), message);
}

// A check fails where the message arrived: tampering on one leg of an
// all-gather fails it at one receiver only. Each site therefore tells every
// other, in a sealed bitmap, which senders failed here, and all leave out
// the union. A bitmap that fails its own check marks its sender as failed
// on that receiver; if that leaves the sites with different sets (a link
// tampering with two kinds of message), the global params differ after the
// round and the divergence check (sync.check_every) stops the run: never a
// silent split. Costs one small all-gather per checked all-gather.
std::vector<bool> Exchange::agree_verdicts(std::vector<bool> failed, const char* kind, std::size_t part) {
  if (!options_.auth) return failed;
  const std::string verdict_kind = std::string("verdict-") + kind;
  std::vector<std::byte> mine(failed.size());
  for (std::size_t s = 0; s < failed.size(); ++s) mine[s] = failed[s] ? std::byte{1} : std::byte{0};
  seal(mine, verdict_kind.c_str(), part);
  auto verdicts = leaders_.all_gather(mine);
  for (std::size_t from = 0; from < verdicts.size(); ++from) {
    if (!unseal(verdicts[from], verdict_kind.c_str(), part, static_cast<int>(from)) ||
        verdicts[from].size() != failed.size()) {
      failed[from] = true;
      continue;
    }
    for (std::size_t s = 0; s < failed.size(); ++s)
      if (verdicts[from][s] != std::byte{0}) failed[s] = true;
  }
  return failed;
}

void Exchange::tamper_arrivals(const char* kind, std::vector<std::vector<std::byte>>& messages) const {
  if (!options_.tamper_received) return;
  for (std::size_t s = 0; s < messages.size(); ++s)
    if (static_cast<int>(s) != leaders_.rank()) options_.tamper_received(kind, static_cast<int>(s), messages[s]);
}

}  // namespace diloco::outer

// Authentication between sites launched apart ([security] key_file): HMAC-
// SHA256 (OpenSSL) under a key every site holds, for the join's challenge
// and for every payload between sites. Knows nothing of what it signs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace diloco::comm {

using MacTag = std::array<std::byte, 32>;

class MessageAuth {
 public:
  // Throws std::invalid_argument for a key under 16 bytes.
  explicit MessageAuth(std::string key);

  // The key in `path` (its bytes, a trailing newline dropped); throws
  // std::invalid_argument naming the file when it cannot be read or is short.
  static MessageAuth from_file(const std::string& path);

  // HMAC-SHA256 over `context` (what the bytes are: a label, the round, the
  // sender, so a tag cannot be replayed elsewhere) followed by `bytes`.
  MacTag tag(std::string_view context, std::span<const std::byte> bytes) const;
  // Constant-time comparison against tag().
  bool verify(std::string_view context, std::span<const std::byte> bytes, std::span<const std::byte> mac) const;

  // A message with its tag at the end: appends tag(context, message); checks
  // and strips it (false, the message unchanged, when it is missing or wrong).
  void seal(std::string_view context, std::vector<std::byte>& message) const;
  bool unseal(std::string_view context, std::vector<std::byte>& message) const;

  // `n` bytes from OpenSSL's generator (join challenges).
  static std::string random_bytes(std::size_t n);

 private:
  std::string key_;
};

}  // namespace diloco::comm

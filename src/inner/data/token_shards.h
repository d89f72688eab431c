// Token shards on disk: llm.c's format (a header of 256 int32: magic,
// version, token count; then uint16 or uint32 ids) and headerless files of
// uint16 or uint32 ids (nanoGPT's .bin). Opening a shard set reads its
// headers only, and each window is read on its own (pread), so neither
// start-up nor resident memory grows with the data's size.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inner/data/dataset.h"

namespace diloco::inner {

// llm.c's header values (dev/data/data_common.py): GPT-2 shards hold uint16
// ids, Llama-3 shards uint32.
inline constexpr std::int32_t kShardMagicU16 = 20240520;
inline constexpr std::int32_t kShardVersionU16 = 1;
inline constexpr std::int32_t kShardMagicU32 = 20240801;
inline constexpr std::int32_t kShardVersionU32 = 7;
inline constexpr std::size_t kShardHeaderBytes = 256 * 4;

struct ShardSet {
  std::shared_ptr<const TokenSource> tokens;  // all shards, one after another
  std::size_t files = 0;
  std::string description;  // "3 token shards (uint16, llm.c)"
};

// Opens the shard files `paths` names (a folder contributes its *.bin files,
// sorted by name). Throws DataError naming the file for a missing path, an
// empty or unreadable file, a wrong magic or version, a header whose count
// disagrees with the file's size, or a size that is no multiple of the width.
ShardSet open_token_shards(const std::vector<std::string>& paths, TokenDtype dtype);

// Writes `ids` as one llm.c shard: uint16 when every id is below 65536, else
// uint32. Through a temporary file renamed into place, so a shard that
// exists is complete. Throws DataError naming the file.
void write_token_shard(const std::string& path, std::span<const std::uint32_t> ids);

}  // namespace diloco::inner

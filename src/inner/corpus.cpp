// Corpus loading, the held-out split and deterministic batch sampling.
#include "inner/corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

namespace diloco::inner {
namespace {

namespace fs = std::filesystem;

// Held-out text is every k-th chunk rather than the tail, so it follows the
// same mix of sources as the training text.
constexpr std::size_t kSplitChunk = 4096;

std::vector<std::uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read data file " + path.string());
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// SplitMix64: turns structured seeds (seed, shard, step) into independent streams.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Corpus Corpus::load(const std::vector<std::string>& paths, double eval_fraction,
                    std::size_t min_bytes) {
  if (paths.empty()) throw DataError("no data paths given");
  std::vector<std::uint8_t> bytes;
  std::size_t files = 0;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::path path(p);
    if (fs::is_directory(path, ec)) {
      std::vector<fs::path> entries;
      for (const auto& entry : fs::directory_iterator(path, ec))
        if (entry.is_regular_file() && !entry.is_symlink()) entries.push_back(entry.path());
      std::sort(entries.begin(), entries.end());
      for (const auto& file : entries) {
        auto content = read_file(file);
        // Binary index files (fortune's .dat) hold NUL bytes; plain text never does.
        if (std::find(content.begin(), content.end(), 0) != content.end()) continue;
        bytes.insert(bytes.end(), content.begin(), content.end());
        ++files;
      }
    } else if (fs::is_regular_file(path, ec)) {
      auto content = read_file(path);
      if (content.empty()) throw DataError("data file " + p + " is empty");
      bytes.insert(bytes.end(), content.begin(), content.end());
      ++files;
    } else {
      throw DataError("data path " + p + " does not exist");
    }
  }
  if (files == 0) {
    std::string list;
    for (const auto& p : paths) list += (list.empty() ? "" : ", ") + p;
    throw DataError("no plain-text files under " + list);
  }
  Corpus c = from_bytes(std::move(bytes), eval_fraction, min_bytes);
  c.files_ = files;
  return c;
}

Corpus Corpus::from_bytes(std::vector<std::uint8_t> bytes, double eval_fraction,
                          std::size_t min_bytes) {
  if (!(eval_fraction > 0.0 && eval_fraction < 1.0))
    throw DataError("eval fraction must be in (0, 1)");
  Corpus c;
  c.files_ = 1;
  const auto stride = std::max<std::size_t>(2, static_cast<std::size_t>(1.0 / eval_fraction + 0.5));
  const std::size_t chunks = (bytes.size() + kSplitChunk - 1) / kSplitChunk;
  for (std::size_t i = 0; i < chunks; ++i) {
    const auto first = bytes.begin() + i * kSplitChunk;
    const auto last = bytes.begin() + std::min(bytes.size(), (i + 1) * kSplitChunk);
    // With fewer chunks than the stride, the last chunk is held out.
    const bool held_out = chunks < stride ? i + 1 == chunks && chunks > 1 : i % stride == stride - 1;
    auto& dst = held_out ? c.eval_ : c.train_;
    dst.insert(dst.end(), first, last);
  }
  if (c.train_.size() < min_bytes || c.eval_.size() < min_bytes)
    throw DataError("corpus too small: " + std::to_string(c.train_.size()) + " training and " +
                    std::to_string(c.eval_.size()) + " held-out bytes, need at least " +
                    std::to_string(min_bytes) + " each");
  return c;
}

BatchSampler::BatchSampler(const Corpus& corpus, const DataConfig& config, ShardSpec spec,
                           int seq_len, std::uint64_t seed)
    : corpus_(corpus), config_(config), spec_(spec), seq_len_(seq_len), seed_(seed) {
  const std::size_t n = corpus.train().size();
  if (config.sharding == Sharding::kContiguous) {
    begin_ = n * spec.shard / spec.num_shards;
    end_ = n * (spec.shard + 1) / spec.num_shards;
  } else {
    begin_ = 0;
    end_ = n;
  }
  if (end_ - begin_ < static_cast<std::size_t>(seq_len) + 2)
    throw DataError("shard " + std::to_string(spec.shard) + " holds " + std::to_string(end_ - begin_) +
                    " bytes, fewer than one sequence of " + std::to_string(seq_len + 1));
  if (corpus.eval().size() < static_cast<std::size_t>(seq_len) + 2)
    throw DataError("held-out text shorter than one sequence");
}

void BatchSampler::train_batch(std::int64_t step, std::vector<std::int64_t>& out) const {
  const std::size_t window = static_cast<std::size_t>(seq_len_) + 1;
  out.resize(static_cast<std::size_t>(config_.batch_size) * window);
  std::uint64_t s = mix(seed_);
  s = mix(s ^ static_cast<std::uint64_t>(spec_.shard));
  s = mix(s ^ static_cast<std::uint64_t>(spec_.replica));
  s = mix(s ^ static_cast<std::uint64_t>(step));
  std::mt19937_64 rng(s);
  std::uniform_int_distribution<std::size_t> pick(begin_, end_ - window);
  const auto& text = corpus_.train();
  for (int b = 0; b < config_.batch_size; ++b) {
    const std::size_t start = pick(rng);
    std::copy(text.begin() + start, text.begin() + start + window, out.begin() + b * window);
  }
}

std::vector<std::int64_t> BatchSampler::eval_windows(int count) const {
  const std::size_t window = static_cast<std::size_t>(seq_len_) + 1;
  const auto& text = corpus_.eval();
  const std::size_t span = text.size() - window;
  std::vector<std::int64_t> out;
  for (int i = spec_.replica; i < count; i += spec_.num_replicas) {
    const std::size_t start = span * static_cast<std::size_t>(i) / static_cast<std::size_t>(count);
    out.insert(out.end(), text.begin() + start, text.begin() + start + window);
  }
  return out;
}

}  // namespace diloco::inner

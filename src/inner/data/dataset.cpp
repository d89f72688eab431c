// Opening a dataset in any format, the vocabulary check, and batch sampling.
#include "inner/data/dataset.h"

#include <algorithm>
#include <random>

#include "inner/data/held_out_split.h"
#include "inner/data/memory_tokens.h"
#include "inner/data/token_shards.h"
#include "inner/data/tokenizer.h"

namespace diloco::inner {
namespace {

// One stream of a format, with what the banner says of it.
struct Stream {
  std::shared_ptr<const TokenSource> tokens;
  std::size_t files = 0;
  std::string description;
  std::uint64_t text_bytes = 0;  // bytes of text read (0 for token shards)
};

Stream read_text(const std::vector<std::string>& paths, const Tokenizer* tokenizer) {
  auto tokens = std::make_shared<MemoryTokens>(tokenizer ? "token" : "byte offset");
  std::vector<std::uint32_t> ids;
  Stream s;
  s.files = for_each_text_file(paths, [&](const std::string& path, const std::string& text) {
    s.text_bytes += text.size();
    if (!tokenizer) return tokens->append_bytes(path, text);
    ids.clear();
    tokenizer->encode(text, ids);
    tokens->append(path, ids);
  });
  s.description = std::to_string(s.files) + (tokenizer ? " text files (SentencePiece)" : " text files (bytes)");
  s.tokens = std::move(tokens);
  return s;
}

Stream open_stream(const DataConfig& c, const std::vector<std::string>& paths, const Tokenizer* tokenizer) {
  if (c.format != DataFormat::kTokens) return read_text(paths, tokenizer);
  ShardSet set = open_token_shards(paths, c.token_dtype);
  return {std::move(set.tokens), set.files, std::move(set.description)};
}

// Ids per block of the start-up sample, and blocks per stream: 256 Ki ids
// at most, whatever the stream's size.
constexpr std::size_t kSampleBlock = 4096;
constexpr std::uint64_t kSampleBlocks = 64;

void check_vocab(const TokenSource& source, int vocab, bool full_scan) {
  std::vector<std::int64_t> ids;
  const std::uint64_t n = source.size();
  const auto check_block = [&](std::uint64_t pos, std::size_t len) {
    ids.resize(len);
    source.read(pos, len, ids.data());
    check_ids(source, pos, ids.data(), len, vocab);
  };
  if (full_scan || n <= kSampleBlock * kSampleBlocks) {
    for (std::uint64_t pos = 0; pos < n; pos += kSampleBlock * 16)
      check_block(pos, static_cast<std::size_t>(std::min<std::uint64_t>(kSampleBlock * 16, n - pos)));
    return;
  }
  for (std::uint64_t b = 0; b < kSampleBlocks; ++b) check_block((n - kSampleBlock) * b / (kSampleBlocks - 1), kSampleBlock);
}

// SplitMix64: turns structured seeds (seed, shard, step) into independent streams.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void check_ids(const TokenSource& source, std::uint64_t pos, const std::int64_t* ids, std::size_t n, int vocab) {
  for (std::size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw DataError("token id " + std::to_string(ids[i]) + " in " + source.where(pos + i) +
                      " is not below model.vocab = " + std::to_string(vocab));
}

namespace {

std::unique_ptr<Tokenizer> open_tokenizer(const DataConfig& config, int vocab) {
  if (config.format != DataFormat::kText) return nullptr;
  if (config.tokenizer.empty()) throw DataError("data.format = \"text\" needs data.tokenizer (a SentencePiece model)");
  auto tokenizer = std::make_unique<Tokenizer>(config.tokenizer);
  if (tokenizer->vocab_size() > vocab)
    throw DataError("tokenizer " + config.tokenizer + " has " + std::to_string(tokenizer->vocab_size()) +
                    " pieces, more than model.vocab = " + std::to_string(vocab));
  return tokenizer;
}

}  // namespace

std::shared_ptr<const TokenSource> open_token_stream(const DataConfig& config, const std::vector<std::string>& paths,
                                                     int vocab, std::uint64_t* text_bytes) {
  const auto tokenizer = open_tokenizer(config, vocab);
  Stream s = open_stream(config, paths, tokenizer.get());
  if (text_bytes) *text_bytes = s.text_bytes;
  return std::move(s.tokens);
}

Dataset open_dataset(const DataConfig& config, int vocab, std::uint64_t min_tokens, bool full_scan) {
  const auto tokenizer = open_tokenizer(config, vocab);
  Stream all = open_stream(config, config.paths, tokenizer.get());
  std::shared_ptr<const TokenSource> train;
  std::shared_ptr<const TokenSource> eval;
  std::string description = all.description;
  std::size_t files = all.files;
  if (config.eval_paths.empty()) {
    std::tie(train, eval) = split_held_out(all.tokens, config.eval_fraction);
  } else {
    Stream held = open_stream(config, config.eval_paths, tokenizer.get());
    train = all.tokens;
    eval = held.tokens;
    files += held.files;
    description += ", held out: " + held.description;
  }
  if (train->size() < min_tokens || eval->size() < min_tokens)
    throw DataError("data too small: " + std::to_string(train->size()) + " training and " +
                    std::to_string(eval->size()) + " held-out tokens, need at least " + std::to_string(min_tokens) +
                    " each");
  check_vocab(*train, vocab, full_scan);
  check_vocab(*eval, vocab, full_scan);
  return Dataset(std::move(train), std::move(eval), files, std::move(description));
}

BatchSampler::BatchSampler(const Dataset& data, const DataConfig& config, ShardSpec spec, int seq_len, int vocab,
                           std::uint64_t seed)
    : data_(data), batch_size_(config.batch_size), spec_(spec), seq_len_(seq_len), vocab_(vocab), seed_(seed) {
  const std::uint64_t n = data.train().size();
  if (config.sharding == Sharding::kContiguous) {
    begin_ = n * static_cast<std::uint64_t>(spec.shard) / static_cast<std::uint64_t>(spec.num_shards);
    end_ = n * static_cast<std::uint64_t>(spec.shard + 1) / static_cast<std::uint64_t>(spec.num_shards);
  } else {
    begin_ = 0;
    end_ = n;
  }
  if (end_ - begin_ < static_cast<std::uint64_t>(seq_len) + 2)
    throw DataError("shard " + std::to_string(spec.shard) + " holds " + std::to_string(end_ - begin_) +
                    " tokens, fewer than one sequence of " + std::to_string(seq_len + 1));
  if (data.eval().size() < static_cast<std::uint64_t>(seq_len) + 2)
    throw DataError("held-out data shorter than one sequence");
}

void BatchSampler::train_batch(std::int64_t step, std::vector<std::int64_t>& out) const {
  const std::size_t window = static_cast<std::size_t>(seq_len_) + 1;
  out.resize(static_cast<std::size_t>(batch_size_) * window);
  std::uint64_t s = mix(seed_);
  s = mix(s ^ static_cast<std::uint64_t>(spec_.shard));
  s = mix(s ^ static_cast<std::uint64_t>(spec_.replica));
  s = mix(s ^ static_cast<std::uint64_t>(step));
  std::mt19937_64 rng(s);
  std::uniform_int_distribution<std::uint64_t> pick(begin_, end_ - window);
  for (int b = 0; b < batch_size_; ++b) {
    const std::uint64_t start = pick(rng);
    std::int64_t* row = out.data() + static_cast<std::size_t>(b) * window;
    data_.train().read(start, window, row);
    check_ids(data_.train(), start, row, window, vocab_);
  }
}

std::vector<std::int64_t> BatchSampler::eval_windows(int count) const {
  const std::size_t window = static_cast<std::size_t>(seq_len_) + 1;
  const TokenSource& eval = data_.eval();
  const std::uint64_t span = eval.size() - window;
  std::vector<std::int64_t> out;
  for (int i = spec_.replica; i < count; i += spec_.num_replicas) {
    const std::uint64_t start = span * static_cast<std::uint64_t>(i) / static_cast<std::uint64_t>(count);
    const std::size_t at = out.size();
    out.resize(at + window);
    eval.read(start, window, out.data() + at);
    check_ids(eval, start, out.data() + at, window, vocab_);
  }
  return out;
}

}  // namespace diloco::inner

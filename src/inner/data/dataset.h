// The Dataset seam: a training and a held-out stream of token ids, whatever
// the format on disk (bytes, token shards, SentencePiece text), and the batch
// sampler the inner loop draws [B, T+1] windows from. No torch here.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace diloco::inner {

enum class Sharding {
  kIid,         // every shard samples the whole training stream
  kContiguous,  // shard i sees only the i-th contiguous slice: the non-IID case
};

enum class DataFormat {
  kBytes,   // plain-text files, one token per byte (vocabulary 256)
  kTokens,  // token shards: llm.c's format, or headerless uint16/uint32 files
  kText,    // plain-text files encoded with a SentencePiece model
};

// How token shards store their ids.
enum class TokenDtype {
  kAuto,    // llm.c shards: the 256-int32 header says the width
  kUint16,  // headerless files of little-endian uint16 (nanoGPT's .bin)
  kUint32,  // headerless files of little-endian uint32
};

struct DataConfig {
  DataFormat format = DataFormat::kBytes;
  std::vector<std::string> paths;       // files, or folders of them
  std::vector<std::string> eval_paths;  // held-out files; empty: hold out eval_fraction of paths
  double eval_fraction = 0.05;
  TokenDtype token_dtype = TokenDtype::kAuto;
  std::string tokenizer;  // text: the SentencePiece model file
  Sharding sharding = Sharding::kIid;
  int batch_size = 8;  // sequences per replica per step
};

// Bad data: the message names the file (and offset where it applies).
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stream of token ids addressed by position. Formats implement it; reads
// are const and may run on any thread.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::uint64_t size() const = 0;
  // Copies ids [pos, pos + n) into `out`; needs pos + n <= size().
  virtual void read(std::uint64_t pos, std::size_t n, std::int64_t* out) const = 0;
  // Where id `pos` is stored, for messages ("FILE at byte offset N").
  virtual std::string where(std::uint64_t pos) const = 0;
};

class Dataset {
 public:
  Dataset(std::shared_ptr<const TokenSource> train, std::shared_ptr<const TokenSource> eval, std::size_t files,
          std::string description)
      : train_(std::move(train)), eval_(std::move(eval)), files_(files), description_(std::move(description)) {}

  const TokenSource& train() const { return *train_; }
  const TokenSource& eval() const { return *eval_; }
  std::size_t files() const { return files_; }
  // One line for the start-up banner, e.g. "3 token shards (uint16)".
  const std::string& description() const { return description_; }

 private:
  std::shared_ptr<const TokenSource> train_;
  std::shared_ptr<const TokenSource> eval_;
  std::size_t files_;
  std::string description_;
};

// Opens the data `config` names. Every stream must hold at least
// `min_tokens` ids, and ids are checked against `vocab` on an evenly spread
// sample (full_scan: every id, as `diloco check` does). Throws DataError.
// Start-up cost and memory do not grow with the size of token shards: only
// their headers and the sample are read.
Dataset open_dataset(const DataConfig& config, int vocab, std::uint64_t min_tokens, bool full_scan = false);

// One stream of `paths` in `config`'s format (data.paths and held-out
// splits aside), for evaluating a model on whole files. `text_bytes`, when
// given, receives the bytes of text read (0 for token shards). Ids are not
// checked here: check_ids each window. Throws DataError.
std::shared_ptr<const TokenSource> open_token_stream(const DataConfig& config, const std::vector<std::string>& paths,
                                                     int vocab, std::uint64_t* text_bytes = nullptr);

// Throws DataError naming the file and offset of the first id in
// [pos, pos + n) of `source` outside [0, vocab); `ids` holds those n ids.
void check_ids(const TokenSource& source, std::uint64_t pos, const std::int64_t* ids, std::size_t n, int vocab);

// Where one replica draws its batches from.
struct ShardSpec {
  int shard = 0;  // which data shard (one per site)
  int num_shards = 1;
  int replica = 0;  // rank within the data-parallel group
  int num_replicas = 1;
};

// Windows of `seq_len + 1` ids (inputs plus the shifted targets). Each batch
// is a pure function of (seed, shard, replica, step), so a resumed run draws
// exactly the batches it would have drawn, and every rank draws something
// different. Every id is checked against the vocabulary as it is copied.
class BatchSampler {
 public:
  BatchSampler(const Dataset& data, const DataConfig& config, ShardSpec spec, int seq_len, int vocab,
               std::uint64_t seed);

  // Fills `out` with batch_size * (seq_len + 1) ids for inner step `step`.
  void train_batch(std::int64_t step, std::vector<std::int64_t>& out) const;

  // Held-out windows at fixed, evenly spaced positions; this replica takes
  // every num_replicas-th of the `count` windows.
  std::vector<std::int64_t> eval_windows(int count) const;

  std::uint64_t shard_begin() const { return begin_; }
  std::uint64_t shard_end() const { return end_; }
  int batch_size() const { return batch_size_; }
  int seq_len() const { return seq_len_; }

 private:
  const Dataset& data_;
  int batch_size_;
  ShardSpec spec_;
  int seq_len_;
  int vocab_;
  std::uint64_t seed_;
  std::uint64_t begin_ = 0;
  std::uint64_t end_ = 0;
};

}  // namespace diloco::inner

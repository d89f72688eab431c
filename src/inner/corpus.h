// The byte corpus: files read once, cut into a training part and an interleaved
// held-out part, and the per-shard, per-replica batch sampler over it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace diloco::inner {

enum class Sharding {
  kIid,         // every shard samples the whole training text
  kContiguous,  // shard i sees only the i-th contiguous slice: the non-IID case
};

struct DataConfig {
  std::vector<std::string> paths;  // files, or folders whose plain-text files are read
  double eval_fraction = 0.05;
  Sharding sharding = Sharding::kIid;
  int batch_size = 8;  // sequences per replica per step
};

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Corpus {
 public:
  // Reads every path; a folder contributes its regular files (sorted by name,
  // links and files holding NUL bytes skipped). Throws DataError when nothing
  // readable is found or the text is too short for `min_bytes` per part.
  static Corpus load(const std::vector<std::string>& paths, double eval_fraction,
                     std::size_t min_bytes);
  // Splits bytes already in memory (tests use this).
  static Corpus from_bytes(std::vector<std::uint8_t> bytes, double eval_fraction,
                           std::size_t min_bytes);

  const std::vector<std::uint8_t>& train() const { return train_; }
  const std::vector<std::uint8_t>& eval() const { return eval_; }
  std::size_t files() const { return files_; }

 private:
  std::vector<std::uint8_t> train_;
  std::vector<std::uint8_t> eval_;
  std::size_t files_ = 0;
};

// Where one replica draws its batches from.
struct ShardSpec {
  int shard = 0;       // which data shard (one per site)
  int num_shards = 1;
  int replica = 0;     // rank within the data-parallel group
  int num_replicas = 1;
};

// Windows of `seq_len + 1` bytes (inputs plus the shifted targets). Each batch
// is a pure function of (seed, shard, replica, step), so a run can resume at any
// step and every rank draws something different.
class BatchSampler {
 public:
  BatchSampler(const Corpus& corpus, const DataConfig& config, ShardSpec spec, int seq_len,
               std::uint64_t seed);

  // Fills `out` with batch_size * (seq_len + 1) tokens for inner step `step`.
  void train_batch(std::int64_t step, std::vector<std::int64_t>& out) const;

  // Held-out windows at fixed, evenly spaced positions; this replica takes
  // every num_replicas-th of the `count` windows.
  std::vector<std::int64_t> eval_windows(int count) const;

  std::size_t shard_begin() const { return begin_; }
  std::size_t shard_end() const { return end_; }
  int batch_size() const { return config_.batch_size; }
  int seq_len() const { return seq_len_; }

 private:
  const Corpus& corpus_;
  DataConfig config_;
  ShardSpec spec_;
  int seq_len_;
  std::uint64_t seed_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace diloco::inner

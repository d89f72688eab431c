// SentencePiece, behind a small wrapper: load a model, encode and decode
// text, train a model from text files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace diloco::inner {

class Tokenizer {
 public:
  // Throws DataError naming `path` when it is missing or not a SentencePiece model.
  explicit Tokenizer(const std::string& path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  int vocab_size() const;
  // Appends the ids of `text`, encoded line by line (SentencePiece treats a
  // line as one sentence, as its trainer does).
  void encode(const std::string& text, std::vector<std::uint32_t>& out) const;
  // The text of `ids` (pieces joined, SentencePiece's word marks as spaces).
  std::string decode(const std::vector<std::uint32_t>& ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TokenizerTraining {
  std::vector<std::string> inputs;  // text files
  std::string model_prefix;         // writes PREFIX.model and PREFIX.vocab
  int vocab_size = 2000;
  std::string model_type = "unigram";  // or "bpe"
};

// Trains a SentencePiece model with byte fallback (no id is ever unknown).
// Throws DataError with SentencePiece's message.
void train_tokenizer(const TokenizerTraining& training);

}  // namespace diloco::inner

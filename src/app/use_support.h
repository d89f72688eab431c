// What eval and sample share: their flags, the device, the model's text
// encoding, and one place that maps errors to exit codes.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/saved_model.h"
#include "inner/data/tokenizer.h"

namespace diloco::app {

// A bad flag; exit 2.
class FlagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct UseFlags {
  std::string model;  // the positional CHECKPOINT|FOLDER
  std::map<std::string, std::vector<std::string>> values;  // --name VALUE (a repeated or multi-valued flag appends)
  std::set<std::string> switches;
  bool help = false;

  std::string text(const std::string& name, const std::string& fallback) const;
  long long integer(const std::string& name, long long fallback, long long lo, long long hi) const;
  double number(const std::string& name, double fallback, double lo, double hi) const;
  bool on(const std::string& name) const { return switches.count(name) > 0; }
};

// Flags of `valued` take a value (those in `multi` every following
// non-flag word too); `switches` take none. Throws FlagError.
UseFlags parse_use_flags(int argc, char** argv, const std::set<std::string>& valued,
                         const std::set<std::string>& multi, const std::set<std::string>& switches);

// --device cpu|cuda|auto for the rank `local_rank` of its node. Throws FlagError.
torch::Device pick_device(const std::string& setting, int local_rank);

// Text to ids and back with the model's tokenizer (or `override_path`; the
// word "bytes" for bytes), or bytes. Throws FlagError when the model's text
// encoding is unknown.
class TextCodec {
 public:
  TextCodec(const SavedModel& model, const std::string& override_path);
  std::vector<std::int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<std::int64_t>& ids) const;
  std::string describe() const;
  // Ids it can decode: the tokenizer's pieces (0 for bytes: any).
  int pieces() const { return tokenizer_ ? tokenizer_->vocab_size() : 0; }

 private:
  std::unique_ptr<inner::Tokenizer> tokenizer_;
  std::string path_;
};

// Runs `body`, mapping typed errors to exit codes with one line on stderr
// ("diloco: error: COMMAND: ..."): input 2, communication 3, internal 1.
// Input errors print on the launcher's rank 0 only (every rank meets the
// same), unless `every_rank`.
int run_guarded(const std::string& command, const std::function<int()>& body, bool every_rank = false);

}  // namespace diloco::app

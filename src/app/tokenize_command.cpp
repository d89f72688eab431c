// `diloco tokenize`: encodes text files with SentencePiece and writes llm.c
// shards (uint16 ids when the vocabulary fits, else uint32), with a progress
// line on a terminal and a summary at the end.
#include "app/tokenize_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>

#include "app/train_report.h"
#include "inner/data/dataset.h"
#include "inner/data/memory_tokens.h"
#include "inner/data/token_shards.h"
#include "inner/data/tokenizer.h"

namespace diloco::app {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::vector<std::string> inputs;
  std::string out;
  std::string tokenizer;
  int train_vocab = 0;
  std::string model_type = "unigram";
  long long shard_tokens = 100'000'000;  // llm.c's shard size
};

// Rewrites one terminal line; silent when stderr is not a terminal.
class Progress {
 public:
  explicit Progress(std::uint64_t total) : total_(total), tty_(isatty(2) != 0) {}
  void update(std::uint64_t done, std::uint64_t tokens) {
    if (!tty_) return;
    const int width = 30;
    const double f = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    const int filled = static_cast<int>(f * width);
    std::fprintf(stderr, "\rtokenize [%s%s] %3.0f%% %s of %s, %s tokens", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), 100.0 * f, human_bytes(static_cast<double>(done)).c_str(),
                 human_bytes(static_cast<double>(total_)).c_str(), human_count(static_cast<double>(tokens)).c_str());
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fputc('\n', stderr);
  }

 private:
  std::uint64_t total_;
  bool tty_;
};

int usage_error(const std::string& message, const std::string& help) {
  std::cerr << "diloco: error: tokenize: " << message << "\n" << help;
  return 2;
}

// What is wrong with the options ("" when nothing is).
std::string options_problem(const Options& o) {
  if (o.inputs.empty() || o.out.empty()) return "needs input files and --out";
  if (o.tokenizer.empty() == (o.train_vocab == 0)) return "give exactly one of --tokenizer MODEL and --train-vocab N";
  if (o.train_vocab != 0 && (o.train_vocab < 300 || o.train_vocab > (1 << 22)))
    return "--train-vocab must be in [300, 4194304] (the 256 byte pieces come first)";
  if (o.model_type != "unigram" && o.model_type != "bpe") return "--model-type must be unigram or bpe";
  if (o.shard_tokens < 1024 || o.shard_tokens > 0x7fffffffLL) return "--shard-tokens must be in [1024, 2147483647]";
  return {};
}

struct Written {
  std::uint64_t tokens = 0;
  int shards = 0;
};

// Encodes `files` into shards of o.shard_tokens tokens in o.out.
Written write_shards(const Options& o, const inner::Tokenizer& tokenizer, const std::vector<std::string>& files,
                     std::uint64_t total_bytes) {
  Progress progress(total_bytes);
  std::vector<std::uint32_t> shard;
  std::uint64_t done = 0;
  Written w;
  const auto flush = [&](std::size_t count) {
    char name[32];
    std::snprintf(name, sizeof name, "shard_%06d.bin", w.shards++);
    inner::write_token_shard((fs::path(o.out) / name).string(), std::span<const std::uint32_t>(shard).first(count));
    shard.erase(shard.begin(), shard.begin() + static_cast<std::ptrdiff_t>(count));
  };
  inner::for_each_text_file(files, [&](const std::string&, const std::string& text) {
    const std::size_t before = shard.size();
    tokenizer.encode(text, shard);
    w.tokens += shard.size() - before;
    while (shard.size() >= static_cast<std::size_t>(o.shard_tokens)) flush(static_cast<std::size_t>(o.shard_tokens));
    done += text.size();
    progress.update(done, w.tokens);
  });
  if (!shard.empty()) flush(shard.size());
  progress.finish();
  return w;
}

// The files, the tokenizer (trained first with --train-vocab), the shards.
// Throws inner::DataError.
void tokenize(const Options& o) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> files;
  std::uint64_t total_bytes = 0;
  inner::for_each_text_file(o.inputs, [&](const std::string& path, const std::string& text) {
    files.push_back(path);
    total_bytes += text.size();
  });
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) throw inner::DataError("cannot create output folder " + o.out + ": " + ec.message());
  std::string model = o.tokenizer;
  if (o.train_vocab) {
    std::cerr << "tokenize: training a " << o.train_vocab << "-piece " << o.model_type << " SentencePiece model on "
              << files.size() << " files (" << human_bytes(static_cast<double>(total_bytes)) << ")\n";
    inner::train_tokenizer({files, (fs::path(o.out) / "tokenizer").string(), o.train_vocab, o.model_type});
    model = (fs::path(o.out) / "tokenizer.model").string();
  }
  const inner::Tokenizer tokenizer(model);
  const Written w = write_shards(o, tokenizer, files, total_bytes);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("tokenize: %llu tokens in %d shard%s in %s (%.2f bytes/token, %s ids, tokenizer %s with %d pieces) "
              "in %.1f s\n",
              static_cast<unsigned long long>(w.tokens), w.shards, w.shards == 1 ? "" : "s", o.out.c_str(),
              w.tokens ? static_cast<double>(total_bytes) / static_cast<double>(w.tokens) : 0.0,
              tokenizer.vocab_size() <= 65536 ? "uint16" : "uint32", model.c_str(), tokenizer.vocab_size(), seconds);
  std::printf("train on it with data.format = \"tokens\", data.paths = [\"%s\"], model.vocab = %d (or more)\n",
              o.out.c_str(), tokenizer.vocab_size());
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  cxxopts::Options parser("diloco tokenize",
                          "Encode text files (or folders of them) with a SentencePiece model into llm.c token shards\n"
                          "for data.format = \"tokens\"; --train-vocab trains the model on the same text first.");
  Options o;
  parser.add_options()("out", "folder for the shards (and the trained tokenizer.model)", cxxopts::value(o.out))(
      "tokenizer", "an existing SentencePiece model", cxxopts::value(o.tokenizer))(
      "train-vocab", "train a SentencePiece model of this many pieces first (byte fallback: no unknown ids)",
      cxxopts::value(o.train_vocab))("model-type", "unigram or bpe, for --train-vocab",
                                     cxxopts::value(o.model_type)->default_value("unigram"))(
      "shard-tokens", "tokens per shard", cxxopts::value(o.shard_tokens)->default_value("100000000"))(
      "inputs", "text files or folders", cxxopts::value(o.inputs))("h,help", "this help");
  parser.parse_positional({"inputs"});
  parser.positional_help("INPUT...");
  const std::string help = parser.help();
  try {
    const auto args = parser.parse(argc - 1, argv + 1);
    if (args.count("help")) {
      std::cout << help;
      return 0;
    }
  } catch (const cxxopts::exceptions::exception& e) {
    return usage_error(e.what(), help);
  }
  if (const std::string problem = options_problem(o); !problem.empty()) return usage_error(problem, help);
  try {
    tokenize(o);
  } catch (const inner::DataError& e) {
    std::cerr << "\ndiloco: error: tokenize: " << e.what() << std::endl;
    return 2;
  }
  return 0;
}

}  // namespace diloco::app

// `diloco sample`: text from a checkpoint or model folder, decoded with the
// run's tokenizer (or as bytes).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/use_commands.h"
#include "app/use_support.h"
#include "inner/inner_loop.h"
#include "inner/sampler.h"

namespace diloco::app {
namespace {

const char* kSampleUsage =
    "usage: diloco sample CHECKPOINT|FOLDER --prompt TEXT [options]\n"
    "Continue TEXT with the model and print the prompt and the continuation. The native models keep a\n"
    "key/value cache, so each new token costs one position; past the model's context the window slides.\n"
    "  --tokens N            new tokens (default 200)\n"
    "  --temperature T       0 picks the most likely token every time (default 0.8)\n"
    "  --top-k K             sample among the K most likely tokens (default 0: all)\n"
    "  --seed S              the sampling generator's seed (default 0)\n"
    "  --tokenizer M         a SentencePiece model, or bytes (default: the model's own; bytes for a\n"
    "                        256-token vocabulary)\n"
    "  --no-cache            recompute the whole window for each token (slower; for comparison)\n"
    "  --device D            cpu, cuda or auto (default auto)\n"
    "  --threads N           intra-op threads\n"
    "  --json                one JSON object: prompt and new ids, the text, tokens per second\n";

int sample_body(int argc, char** argv) {
  const UseFlags f = parse_use_flags(
      argc, argv, {"prompt", "tokens", "temperature", "top-k", "seed", "tokenizer", "device", "threads"}, {},
      {"json", "no-cache"});
  if (f.help) {
    std::cout << kSampleUsage;
    return 0;
  }
  if (!f.values.count("prompt")) throw FlagError("needs --prompt TEXT");
  inner::prepare_host_compute(f.values.count("threads") ? static_cast<int>(f.integer("threads", 1, 1, 256)) : 0);
  inner::SampleOptions o;
  o.tokens = static_cast<int>(f.integer("tokens", 200, 1, 1 << 24));
  o.temperature = f.number("temperature", 0.8, 0.0, 100.0);
  o.top_k = static_cast<int>(f.integer("top-k", 0, 0, 1 << 24));
  o.seed = static_cast<std::uint64_t>(f.integer("seed", 0, 0, std::int64_t{1} << 62));
  o.use_cache = !f.on("no-cache");
  SavedModel m = load_saved_model(f.model);
  const TextCodec codec(m, f.text("tokenizer", ""));
  o.id_limit = codec.pieces();
  const std::string prompt = f.text("prompt", "");
  const auto prompt_ids = codec.encode(prompt);
  if (prompt_ids.empty()) throw FlagError("--prompt encodes to no tokens; give some text");
  const auto device = pick_device(f.text("device", "auto"), 0);
  m.model->to(device);
  const bool json = f.on("json");
  if (!json) std::fputs(prompt.c_str(), stdout);
  // Printed as it grows: the text of all ids so far, less what is out.
  std::vector<std::int64_t> so_far;
  std::string printed;
  const auto start = std::chrono::steady_clock::now();
  const auto ids = inner::sample(*m.model, prompt_ids, o, device, [&](std::int64_t id) {
    if (json) return;
    so_far.push_back(id);
    const std::string text = codec.decode(so_far);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
      std::fputs(text.substr(printed.size()).c_str(), stdout);
      std::fflush(stdout);
      printed = text;
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!json) {
    std::fputs("\n", stdout);
    return 0;
  }
  const nlohmann::json j = {{"model", m.source}, {"tokenizer", codec.describe()}, {"prompt", prompt},
                            {"prompt_ids", prompt_ids}, {"ids", ids}, {"text", codec.decode(ids)},
                            {"seconds", seconds}, {"tokens_per_s", static_cast<double>(ids.size()) / seconds}};
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  return 0;
}

}  // namespace

int run_sample(int argc, char** argv) { return run_guarded("sample", [&] { return sample_body(argc, argv); }); }

}  // namespace diloco::app

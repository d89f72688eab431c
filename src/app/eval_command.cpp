// `diloco eval`: loss, perplexity and bits per byte of a checkpoint or model
// folder on given data, alone or split by window across mpirun's ranks.
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/launch_env.h"
#include "app/use_commands.h"
#include "app/use_support.h"
#include "comm/mpi_communicator.h"
#include "inner/evaluator.h"
#include "inner/inner_loop.h"

namespace diloco::app {
namespace {

const char* kEvalUsage =
    "usage: diloco eval CHECKPOINT|FOLDER --data PATH... [options]\n"
    "Mean next-token loss, perplexity and bits per byte of a model on the given files or folders; every\n"
    "token after the first is predicted once, in windows of --seq-len. Under mpirun the windows are split\n"
    "across ranks.\n"
    "  --data PATH...        files or folders (repeatable)\n"
    "  --format F            bytes, tokens or text (default: how the model's run read its data; text\n"
    "                        with --tokenizer; a folder: text with its tokenizer.model, bytes for a\n"
    "                        256-token vocabulary, else tokens)\n"
    "  --tokenizer M         text: the SentencePiece model (default: the model's own)\n"
    "  --token-dtype D       tokens: auto (llm.c shards), uint16 or uint32\n"
    "  --seq-len N           window (default: the model's training context)\n"
    "  --batch N             windows per forward pass (default 8)\n"
    "  --max-tokens N        evaluate the first N tokens only\n"
    "  --device D            cpu, cuda or auto (default auto)\n"
    "  --threads N           intra-op threads per process\n"
    "  --json                one JSON object instead of the table\n";

inner::DataConfig data_config(const UseFlags& f, const SavedModel& m) {
  inner::DataConfig d;
  d.paths = f.values.count("data") ? f.values.at("data") : std::vector<std::string>{};
  if (d.paths.empty()) throw FlagError("--data names no file");
  const std::string format = f.text("format", "");
  d.format = format == "bytes" ? inner::DataFormat::kBytes
             : format == "tokens" ? inner::DataFormat::kTokens
             : format == "text" ? inner::DataFormat::kText
             : !format.empty() ? throw FlagError("--format " + format + ": expected bytes, tokens or text")
             : f.values.count("tokenizer") ? inner::DataFormat::kText
                                           : m.text_format;
  if (d.format == inner::DataFormat::kText) {
    d.tokenizer = f.text("tokenizer", m.tokenizer);
    if (d.tokenizer.empty()) throw FlagError("--format text needs --tokenizer (the model has none)");
  }
  const std::string dtype = f.text("token-dtype", "auto");
  d.token_dtype = dtype == "auto" ? inner::TokenDtype::kAuto
                  : dtype == "uint16" ? inner::TokenDtype::kUint16
                  : dtype == "uint32" ? inner::TokenDtype::kUint32
                                      : throw FlagError("--token-dtype " + dtype + ": expected auto, uint16 or uint32");
  return d;
}

// Bytes of text the evaluated tokens stand for: one each for bytes; all the
// text read for SentencePiece text, when all of it was evaluated; unknown
// (0) for token shards.
double bytes_covered(const inner::DataConfig& d, std::int64_t tokens, std::uint64_t text_bytes, bool whole) {
  if (d.format == inner::DataFormat::kBytes) return static_cast<double>(tokens);
  if (d.format != inner::DataFormat::kText || !whole) return 0.0;
  return static_cast<double>(text_bytes);
}

void report(const UseFlags& f, const SavedModel& m, const inner::DataConfig& d, const inner::EvalTotals& t, int seq_len,
            int ranks, std::uint64_t text_bytes) {
  const double loss = t.nats / static_cast<double>(t.tokens);
  const double bytes = bytes_covered(d, t.tokens + 1, text_bytes, f.text("max-tokens", "").empty());
  nlohmann::json j = {{"model", m.source}, {"signature", m.model->signature()}, {"tokens", t.tokens},
                      {"seq_len", seq_len}, {"ranks", ranks}, {"loss", loss}, {"perplexity", std::exp(loss)},
                      {"bits_per_byte", nullptr}, {"bytes", nullptr}};
  if (bytes > 0) {
    // Nats over every predicted token, per byte of the text, in bits.
    j["bits_per_byte"] = t.nats * (static_cast<double>(t.tokens + 1) / static_cast<double>(t.tokens)) / std::log(2.0) / bytes;
    j["bytes"] = bytes;
  }
  if (f.on("json")) {
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return;
  }
  std::printf("model          %s\n", m.source.c_str());
  std::printf("tokens         %lld (windows of %d, %d rank%s)\n", static_cast<long long>(t.tokens), seq_len, ranks,
              ranks == 1 ? "" : "s");
  std::printf("loss           %.6f nats/token\n", loss);
  std::printf("perplexity     %.4f\n", std::exp(loss));
  if (bytes > 0) std::printf("bits per byte  %.6f\n", j["bits_per_byte"].get<double>());
  else std::printf("bits per byte  unknown (token shards, or text cut by --max-tokens)\n");
}

int eval_body(int argc, char** argv) {
  const UseFlags f = parse_use_flags(
      argc, argv, {"data", "format", "tokenizer", "token-dtype", "seq-len", "batch", "max-tokens", "device", "threads"},
      {"data"}, {"json"});
  if (f.help) {
    std::cout << kEvalUsage;
    return 0;
  }
  std::unique_ptr<comm::MpiSession> mpi;
  std::unique_ptr<comm::MpiCommunicator> world;
  int local_rank = 0;
  if (launched_by_mpi()) {
    mpi = std::make_unique<comm::MpiSession>(&argc, &argv);
    world = comm::MpiCommunicator::world();
    local_rank = comm::node_rank(*world).rank;
  }
  inner::prepare_host_compute(f.values.count("threads") ? static_cast<int>(f.integer("threads", 1, 1, 256)) : 0);
  SavedModel m = load_saved_model(f.model);
  const auto d = data_config(f, m);
  inner::EvalWindows w;
  w.seq_len = static_cast<int>(f.integer("seq-len", m.config.seq_len, 1, m.model->context_length()));
  w.batch = static_cast<int>(f.integer("batch", 8, 1, 1 << 16));
  w.max_tokens = f.integer("max-tokens", 0, 2, std::int64_t{1} << 50);
  w.replica = world ? world->rank() : 0;
  w.replicas = world ? world->size() : 1;
  const auto device = pick_device(f.text("device", "auto"), local_rank);
  std::uint64_t text_bytes = 0;
  const auto data = inner::open_token_stream(d, d.paths, m.model->vocab(), &text_bytes);
  if (data->size() < 2) throw inner::DataError("--data holds " + std::to_string(data->size()) + " tokens; eval needs 2");
  m.model->to(device);
  inner::EvalTotals totals;
  // A bad id is met by the rank whose window holds it: that rank says so
  // and ends the job, so no other rank waits for it.
  const int code = run_guarded("eval", [&] {
    totals = inner::evaluate(*m.model, *data, w, device);
    return 0;
  }, /*every_rank=*/true);
  if (code != 0) {
    if (world && world->size() > 1) comm::MpiSession::abort(code);
    return code;
  }
  if (world) {
    double sums[2] = {totals.nats, static_cast<double>(totals.tokens)};
    world->all_reduce_sum(std::span<double>(sums, 2));
    totals = {sums[0], static_cast<std::int64_t>(sums[1])};
  }
  if (w.replica == 0) report(f, m, d, totals, w.seq_len, w.replicas, text_bytes);
  return 0;
}

}  // namespace

int run_eval(int argc, char** argv) { return run_guarded("eval", [&] { return eval_body(argc, argv); }); }

}  // namespace diloco::app

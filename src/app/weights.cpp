// model.init_from and `diloco export`.
#include "app/weights.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <map>

#include "app/saved_model.h"
#include "inner/models/hf_config.h"
#include "inner/models/hf_folder.h"
#include "inner/models/model.h"
#include "inner/models/safetensors.h"
#include "inner/models/weights.h"
#include "outer/checkpoint.h"
#include "outer/trainer.h"

namespace diloco::app {

void init_weights(const Recipe& recipe, inner::InnerLoop& loop) {
  const std::string& from = recipe.model_source.init_from;
  if (from.empty()) return;
  const std::string key = "model.init_from: ";
  if (!std::filesystem::is_directory(from) || inner::is_model_folder(from)) {
    try {
      loop.load_weights(from);
    } catch (const inner::WeightsError& e) {
      throw inner::WeightsError(key + e.what());
    }
    return;
  }
  // Another run's checkpoint: its global parameters, for the same model.
  std::string signature;
  std::vector<float> global;
  try {
    if (const auto problem = outer::CheckpointStore::verify(from); !problem.empty())
      throw outer::CheckpointError(from + " does not verify: " + problem);
    global = outer::Trainer::global_params_of(from, signature);
  } catch (const outer::CheckpointError& e) {
    throw inner::WeightsError(key + e.what());
  }
  if (signature != loop.model_signature())
    throw inner::WeightsError(key + from + " holds a model of " + signature + "; the recipe builds " +
                              loop.model_signature());
  auto params = loop.params();
  std::copy(global.begin(), global.end(), params.begin());
}

namespace {

// "5GB", "200MB", "64KB", "1000" (bytes), as Hugging Face's max_shard_size reads.
std::uint64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
  const std::map<std::string, double> units{{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
                                            {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
  if (used == 0 || !units.count(unit) || !(v * units.at(unit) >= 1.0))
    throw inner::WeightsError("--max-shard-size " + text + ": expected a size such as 5GB, 200MB or 1000000");
  return static_cast<std::uint64_t>(v * units.at(unit));
}

struct ExportOptions {
  std::string source, format = "safetensors", out, max_shard = "5GB";
};

const char* kExportUsage =
    "usage: diloco export CHECKPOINT|FOLDER [--format safetensors|hf] --out PATH [--max-shard-size SIZE]\n"
    "Write a checkpoint's global parameters (or a model folder's weights), named as the model names them\n"
    "(Hugging Face's Llama layout for model.kind = \"llama\"):\n"
    "  safetensors  one safetensors file (F32)\n"
    "  hf           a folder Hugging Face's libraries open as is: config.json (LlamaForCausalLM),\n"
    "               model.safetensors (sharded past --max-shard-size, default 5GB, with\n"
    "               model.safetensors.index.json) and the run's SentencePiece model as tokenizer.model\n";

int export_model(const ExportOptions& o) {
  SavedModel saved = load_saved_model(o.source);
  std::vector<float> flat;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  for (const auto& [name, p] : saved.model->named_parameters()) {
    const auto c = p.contiguous();
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    shapes.emplace_back(name, std::vector<std::int64_t>(p.sizes().begin(), p.sizes().end()));
  }
  std::vector<inner::NamedTensor> tensors;
  std::size_t offset = 0;
  for (const auto& [name, shape] : shapes) {
    std::size_t count = 1;
    for (auto d : shape) count *= static_cast<std::size_t>(d);
    tensors.push_back({name, shape, std::span<const float>(flat).subspan(offset, count)});
    offset += count;
  }
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"diloco_model", saved.model->signature()}};
  if (saved.round >= 0) metadata["diloco_round"] = std::to_string(saved.round);
  if (o.format == "safetensors") {
    inner::write_safetensors(o.out, tensors, metadata);
    std::cout << "wrote " << tensors.size() << " tensors (" << flat.size() << " parameters) to " << o.out << "\n";
    return 0;
  }
  if (saved.config.kind == inner::ModelKind::kTorchScript)
    throw inner::WeightsError(o.source + ": a TorchScript model has no Hugging Face config; use --format safetensors");
  inner::ModelFolder folder;
  folder.config_json = inner::hf_config_json(saved.config);
  folder.tensors = tensors;
  folder.metadata = metadata;
  folder.max_shard_bytes = parse_size(o.max_shard);
  folder.tokenizer_model = saved.tokenizer;
  const auto files = inner::write_model_folder(o.out, folder);
  std::cout << "wrote " << o.out << ":";
  for (const auto& f : files) std::cout << " " << f;
  std::cout << " (" << tensors.size() << " tensors, " << flat.size() << " parameters)\n";
  if (saved.config.kind == inner::ModelKind::kGpt)
    std::cout << "note: the byte GPT is not a Hugging Face architecture: its config.json (model_type \"diloco-gpt\") "
                 "is read by diloco eval and diloco sample, not by Hugging Face's libraries\n";
  return 0;
}

}  // namespace

int run_export(int argc, char** argv) {
  ExportOptions o;
  o.format.clear();
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kExportUsage;
      return 0;
    }
    if ((a == "--format" || a == "--out" || a == "--max-shard-size") && i + 1 < argc)
      (a == "--format" ? o.format : a == "--out" ? o.out : o.max_shard) = argv[++i];
    else if (a.rfind("-", 0) != 0 && o.source.empty()) o.source = a;
    else {
      std::cerr << "diloco: error: export: unexpected argument '" << a << "'\n" << kExportUsage;
      return 2;
    }
  }
  if (o.source.empty() || o.out.empty()) {
    std::cerr << "diloco: error: export needs a checkpoint (or model folder) and --out\n" << kExportUsage;
    return 2;
  }
  if (o.format.empty()) o.format = "safetensors";
  if (o.format != "safetensors" && o.format != "hf") {
    std::cerr << "diloco: error: export: --format " << o.format << ": expected safetensors or hf\n";
    return 2;
  }
  try {
    return export_model(o);
  } catch (const outer::CheckpointError& e) {
    std::cerr << "diloco: error: export: " << e.what() << std::endl;
  } catch (const RecipeError& e) {
    std::cerr << "diloco: error: export: " << e.what() << std::endl;
  } catch (const inner::WeightsError& e) {
    std::cerr << "diloco: error: export: " << e.what() << std::endl;
  } catch (const inner::ModelError& e) {
    std::cerr << "diloco: error: export: " << e.what() << std::endl;
  }
  return 2;
}

}  // namespace diloco::app

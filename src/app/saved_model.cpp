// Models from checkpoints and model folders, for export, eval and sample.
#include "app/saved_model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "app/recipe.h"
#include "inner/models/hf_config.h"
#include "inner/models/hf_folder.h"
#include "inner/models/safetensors.h"
#include "inner/models/weights.h"
#include "outer/checkpoint.h"
#include "outer/trainer.h"

namespace diloco::app {
namespace fs = std::filesystem;
namespace {

// The tokenizer.model `diloco tokenize` leaves beside its shards, if any.
std::string shard_tokenizer(const inner::DataConfig& data) {
  for (const auto& p : data.paths) {
    std::error_code ec;
    const fs::path dir = fs::is_directory(p, ec) ? fs::path(p) : fs::path(p).parent_path();
    if (fs::is_regular_file(dir / "tokenizer.model", ec)) return (dir / "tokenizer.model").string();
  }
  return {};
}

SavedModel from_checkpoint(const std::string& path) {
  if (const auto problem = outer::CheckpointStore::verify(path); !problem.empty())
    throw outer::CheckpointError(path + " does not verify: " + problem);
  // The checkpoint's own recipe says which model its parameters belong to;
  // its weights replace whatever model.init_from named.
  const std::string recipe_path = path + "/recipe.toml";
  const Recipe recipe = parse_recipe(outer::CheckpointStore::read_file(recipe_path), recipe_path, {"model.init_from=\"\""});
  std::string signature;
  const auto global = outer::Trainer::global_params_of(path, signature);
  SavedModel m;
  m.config = recipe.model;
  m.model = inner::make_model(recipe.model);
  if (m.model->signature() != signature)
    throw outer::CheckpointError(path + " holds a model of " + signature + "; its recipe.toml builds " +
                                 m.model->signature());
  torch::NoGradGuard no_grad;
  std::size_t offset = 0;
  for (auto& [name, p] : m.model->named_parameters()) {
    const auto n = static_cast<std::size_t>(p.numel());
    std::memcpy(p.data_ptr<float>(), global.data() + offset, n * sizeof(float));
    offset += n;
  }
  m.round = outer::CheckpointStore::round_of(path);
  m.source = "checkpoint " + path + " (round " + std::to_string(m.round) + ")";
  if (recipe.data.format == inner::DataFormat::kText) {
    m.text_format = inner::DataFormat::kText;
    m.tokenizer = recipe.data.tokenizer;
  } else if (recipe.data.format == inner::DataFormat::kTokens) {
    m.tokenizer = shard_tokenizer(recipe.data);
    m.text_format = m.tokenizer.empty() ? inner::DataFormat::kTokens : inner::DataFormat::kText;
  }
  return m;
}

SavedModel from_folder(const std::string& path) {
  SavedModel m;
  m.config = inner::read_hf_config(path + "/config.json");
  try {
    m.model = inner::make_model(m.config);
  } catch (const inner::ModelError& e) {
    throw inner::WeightsError(path + "/config.json: " + e.what());
  }
  inner::load_weights(*m.model, path);
  m.source = "model folder " + path;
  std::error_code ec;
  if (fs::is_regular_file(fs::path(path) / "tokenizer.model", ec)) {
    m.text_format = inner::DataFormat::kText;
    m.tokenizer = (fs::path(path) / "tokenizer.model").string();
  } else if (m.config.vocab != 256) {
    // Not diloco's byte vocabulary, and no SentencePiece model: which
    // tokenizer made its ids is unknown (tokenizer.json is not read).
    m.text_format = inner::DataFormat::kTokens;
  }
  return m;
}

}  // namespace

SavedModel load_saved_model(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw inner::WeightsError(path + ": " + (fs::exists(path, ec) ? "not a folder" : "no such folder") +
                              "; give a checkpoint folder or a model folder (config.json and safetensors)");
  if (inner::is_model_folder(path)) return from_folder(path);
  if (!fs::exists(fs::path(path) / "MANIFEST", ec))
    throw inner::WeightsError(path + ": neither a checkpoint (no MANIFEST) nor a model folder (no config.json)");
  return from_checkpoint(path);
}

}  // namespace diloco::app

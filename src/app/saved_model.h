// A trained model to use outside training (export, eval, sample): read from a
// checkpoint folder (its recipe.toml and global params) or a model folder
// (config.json and safetensors), with the tokenizer its text went through.
#pragma once

#include <memory>
#include <string>

#include "inner/data/dataset.h"
#include "inner/model_config.h"
#include "inner/models/model.h"

namespace diloco::app {

struct SavedModel {
  inner::ModelConfig config;
  std::unique_ptr<inner::Model> model;
  std::string source;  // "checkpoint PATH (round N)" or "model folder PATH"
  int round = -1;      // a checkpoint's outer round
  // How text becomes its token ids: bytes, or a SentencePiece model
  // (data.format "text", a "tokens" run whose shard folder holds the
  // tokenizer.model `diloco tokenize` wrote, or a folder's tokenizer.model);
  // kTokens when the tokenizer is unknown.
  inner::DataFormat text_format = inner::DataFormat::kBytes;
  std::string tokenizer;
};

// Throws outer::CheckpointError (a checkpoint that does not verify or does
// not match its recipe), RecipeError or inner::WeightsError (a model
// folder): each names the file at fault, and main maps them to exit 2.
SavedModel load_saved_model(const std::string& path);

}  // namespace diloco::app

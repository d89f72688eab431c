// A model folder as Hugging Face lays one out: config.json, the weights as
// model.safetensors or as shards that model.safetensors.index.json maps, and
// the SentencePiece model (tokenizer.model) when there is one. No torch here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inner/models/safetensors.h"

namespace diloco::inner {

// True when `path` is a folder holding config.json.
bool is_model_folder(const std::string& path);

// The weight files of a folder (the shards the index names, or
// model.safetensors), each checked as SafetensorsFile checks one. Throws
// WeightsError naming the folder or file at fault, and a tensor the index
// maps to a file that lacks it.
std::vector<std::unique_ptr<SafetensorsFile>> open_folder_weights(const std::string& folder);

struct ModelFolder {
  std::string config_json;
  std::vector<NamedTensor> tensors;  // F32, in this order
  std::map<std::string, std::string> metadata;  // every shard's __metadata__
  // A shard holds tensors up to this many bytes (a larger tensor alone);
  // one file when everything fits: model.safetensors.
  std::uint64_t max_shard_bytes = std::uint64_t{5} << 30;
  // A SentencePiece model file copied in as tokenizer.model, with a
  // tokenizer_config.json that adds no BOS or EOS ids ("" for none).
  std::string tokenizer_model;
};

// Writes `folder` into a temporary sibling and renames it into place; an
// existing model folder there is replaced only once the new one is
// complete. Returns the files written. Throws WeightsError.
std::vector<std::string> write_model_folder(const std::string& out, const ModelFolder& folder);

}  // namespace diloco::inner

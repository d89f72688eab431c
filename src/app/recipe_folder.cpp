// model.init_from naming a model folder: the architecture comes from its
// config.json, and the recipe's explicit model keys must agree with it.
#include <cmath>
#include <sstream>

#include "app/recipe_key.h"
#include "inner/models/hf_config.h"
#include "inner/models/hf_folder.h"
#include "inner/models/safetensors.h"

namespace diloco::app::recipe_keys {
namespace {

// One architecture key: its text in the recipe and in the folder's config.
struct Field {
  const char* key;         // model.<key>
  const char* json_field;  // its name in config.json
  std::string recipe, folder;
};

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string scaling(const inner::RopeScaling& s) {
  if (s.type.empty()) return "none";
  return s.type + " (factor " + number(s.factor) + ", low_freq_factor " + number(s.low_freq_factor) +
         ", high_freq_factor " + number(s.high_freq_factor) + ", original_max_position_embeddings " +
         std::to_string(s.original_max_positions) + ")";
}

std::vector<Field> fields(const inner::ModelConfig& r, const inner::ModelConfig& f) {
  const auto kind = [](inner::ModelKind k) {
    return std::string(k == inner::ModelKind::kLlama ? "llama" : k == inner::ModelKind::kGpt ? "gpt" : "torchscript");
  };
  const auto kv = [](const inner::ModelConfig& c) { return c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads; };
  std::vector<Field> out = {
      {"kind", "model_type", kind(r.kind), kind(f.kind)},
      {"vocab", "vocab_size", std::to_string(r.vocab), std::to_string(f.vocab)},
      {"d_model", "hidden_size", std::to_string(r.d_model), std::to_string(f.d_model)},
      {"n_layers", "num_hidden_layers", std::to_string(r.n_layers), std::to_string(f.n_layers)},
      {"n_heads", "num_attention_heads", std::to_string(r.n_heads), std::to_string(f.n_heads)}};
  if (f.kind == inner::ModelKind::kGpt) {
    out.push_back({"seq_len", "n_positions", std::to_string(r.seq_len), std::to_string(f.seq_len)});
    return out;
  }
  out.push_back({"n_kv_heads", "num_key_value_heads", std::to_string(kv(r)), std::to_string(kv(f))});
  out.push_back({"ffn_hidden", "intermediate_size", std::to_string(inner::llama_ffn_hidden(r)),
                 std::to_string(inner::llama_ffn_hidden(f))});
  out.push_back({"tie_embeddings", "tie_word_embeddings", r.tie_embeddings ? "true" : "false",
                 f.tie_embeddings ? "true" : "false"});
  out.push_back({"rope_theta", "rope_theta", number(r.rope_theta), number(f.rope_theta)});
  out.push_back({"norm_eps", "rms_norm_eps", number(r.norm_eps), number(f.norm_eps)});
  out.push_back({"rope_scaling", "rope_scaling", scaling(r.rope_scaling), scaling(f.rope_scaling)});
  out.push_back({"max_positions", "max_position_embeddings", std::to_string(inner::context_length(r)),
                 std::to_string(f.max_positions)});
  return out;
}

}  // namespace

void take_folder_architecture(Recipe& r, const std::function<bool(const std::string&)>& given,
                              const std::function<std::string(const std::string&)>& locate) {
  const std::string& folder = r.model_source.init_from;
  if (!inner::is_model_folder(folder)) return;
  if (!r.model_source.preset.empty())
    throw RecipeError(locate("preset") + ": model.preset and the model folder in model.init_from (" + folder +
                      ") both give the architecture; keep one");
  const std::string config_path = folder + "/config.json";
  inner::ModelConfig f;
  try {
    f = inner::read_hf_config(config_path);
  } catch (const inner::WeightsError& e) {
    throw RecipeError(locate("init_from") + ": model.init_from: " + e.what());
  }
  for (const auto& field : fields(r.model, f)) {
    if (!given(field.key) || field.recipe == field.folder) continue;
    throw RecipeError(locate(field.key) + ": model." + field.key + " = " + field.recipe + ", but " + config_path +
                      " has " + field.json_field + " = " + field.folder + " (leave the key out to take the folder's)");
  }
  const int seq_len = given("seq_len") ? r.model.seq_len : f.kind == inner::ModelKind::kGpt ? f.seq_len : r.model.seq_len;
  r.model = f;
  r.model.seq_len = seq_len;
  if (f.kind == inner::ModelKind::kLlama && seq_len > f.max_positions)
    throw RecipeError(locate("seq_len") + ": model.seq_len (" + std::to_string(seq_len) + ") exceeds " + config_path +
                      "'s max_position_embeddings (" + std::to_string(f.max_positions) + ")");
}

}  // namespace diloco::app::recipe_keys

// config.json for Llama (Hugging Face's LlamaConfig fields and defaults) and
// for the byte GPT, through nlohmann-json.
#include "inner/models/hf_config.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "inner/models/safetensors.h"

namespace diloco::inner {
namespace {

using nlohmann::json;

// Typed reads that name the field at fault.
class Fields {
 public:
  Fields(const json& j, std::string source) : j_(j), source_(std::move(source)) {}
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw WeightsError(source_ + ": " + field + " " + why);
  }
  bool has(const std::string& field) const { return j_.contains(field) && !j_.at(field).is_null(); }
  long long integer(const std::string& field, long long fallback, bool required, long long lo, long long hi) const {
    if (!has(field)) {
      if (required) fail(field, "is missing");
      return fallback;
    }
    const auto& v = j_.at(field);
    if (!v.is_number_integer()) fail(field, "must be an integer (is " + v.dump() + ")");
    const auto n = v.get<long long>();
    if (n < lo || n > hi) fail(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (is " + v.dump() + ")");
    return n;
  }
  double number(const std::string& field, double fallback) const {
    if (!has(field)) return fallback;
    const auto& v = j_.at(field);
    if (!v.is_number()) fail(field, "must be a number (is " + v.dump() + ")");
    return v.get<double>();
  }
  bool boolean(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!j_.at(field).is_boolean()) fail(field, "must be true or false (is " + j_.at(field).dump() + ")");
    return j_.at(field).get<bool>();
  }
  std::string string(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    if (!j_.at(field).is_string()) fail(field, "must be a string (is " + j_.at(field).dump() + ")");
    return j_.at(field).get<std::string>();
  }

 private:
  const json& j_;
  std::string source_;
};

RopeScaling read_rope_scaling(const json& j, const std::string& source) {
  RopeScaling s;
  if (!j.contains("rope_scaling") || j.at("rope_scaling").is_null()) return s;
  const auto& r = j.at("rope_scaling");
  if (!r.is_object()) throw WeightsError(source + ": rope_scaling must be an object or null (is " + r.dump() + ")");
  // Older configs call rope_type "type".
  const char* type_field = r.contains("rope_type") ? "rope_type" : "type";
  const Fields f(r, source);
  const std::string type = f.string(type_field, "default");
  if (type == "default") return s;
  if (type != "llama3")
    f.fail(std::string("rope_scaling.") + type_field,
           "\"" + type + "\" is not implemented (diloco computes \"llama3\" scaling, or none)");
  s.type = type;
  for (const char* field : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    if (!f.has(field)) f.fail(std::string("rope_scaling.") + field, "is missing (rope_type \"llama3\" needs it)");
  s.factor = f.number("factor", 0.0);
  s.low_freq_factor = f.number("low_freq_factor", 0.0);
  s.high_freq_factor = f.number("high_freq_factor", 0.0);
  s.original_max_positions = static_cast<int>(f.integer("original_max_position_embeddings", 0, true, 1, 1 << 24));
  return s;
}

ModelConfig read_llama(const json& j, const std::string& source) {
  const Fields f(j, source);
  ModelConfig c;
  c.kind = ModelKind::kLlama;
  c.d_model = static_cast<int>(f.integer("hidden_size", 0, true, 8, 1 << 16));
  c.n_layers = static_cast<int>(f.integer("num_hidden_layers", 0, true, 1, 1024));
  c.n_heads = static_cast<int>(f.integer("num_attention_heads", 0, true, 1, 1024));
  c.n_kv_heads = static_cast<int>(f.integer("num_key_value_heads", c.n_heads, false, 1, 1024));
  c.ffn_hidden = static_cast<int>(f.integer("intermediate_size", 0, true, 1, 1 << 20));
  c.vocab = static_cast<int>(f.integer("vocab_size", 0, true, 2, 1 << 24));
  // LlamaConfig's defaults for the fields a config may leave out.
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_embeddings = f.boolean("tie_word_embeddings", false);
  c.max_positions = static_cast<int>(f.integer("max_position_embeddings", 2048, false, 2, 1 << 24));
  c.seq_len = std::min(c.max_positions, kFolderSeqLenCap);
  c.rope_scaling = read_rope_scaling(j, source);
  if (c.d_model % c.n_heads != 0) f.fail("num_attention_heads", "must divide hidden_size");
  if (f.has("head_dim") && f.integer("head_dim", 0, true, 1, 1 << 16) != c.d_model / c.n_heads)
    f.fail("head_dim", "(" + j.at("head_dim").dump() + ") differs from hidden_size / num_attention_heads (" +
                           std::to_string(c.d_model / c.n_heads) + "); diloco's Llama does not compute that");
  if (const auto act = f.string("hidden_act", "silu"); act != "silu")
    f.fail("hidden_act", "\"" + act + "\" is not implemented (diloco's Llama uses SwiGLU with silu)");
  for (const char* bias : {"attention_bias", "mlp_bias"})
    if (f.boolean(bias, false)) f.fail(bias, "is true; diloco's Llama has no biases");
  try {
    check_llama_config(c);
  } catch (const std::invalid_argument& e) {
    throw WeightsError(source + ": " + e.what());
  }
  return c;
}

ModelConfig read_gpt(const json& j, const std::string& source) {
  const Fields f(j, source);
  ModelConfig c;
  c.kind = ModelKind::kGpt;
  c.vocab = static_cast<int>(f.integer("vocab_size", 0, true, 2, 1 << 24));
  c.d_model = static_cast<int>(f.integer("n_embd", 0, true, 8, 1 << 16));
  c.n_layers = static_cast<int>(f.integer("n_layer", 0, true, 1, 1024));
  c.n_heads = static_cast<int>(f.integer("n_head", 0, true, 1, 1024));
  c.seq_len = static_cast<int>(f.integer("n_positions", 0, true, 2, 1 << 20));
  if (c.d_model % c.n_heads != 0) f.fail("n_head", "must divide n_embd");
  return c;
}

}  // namespace

ModelConfig parse_hf_config(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw WeightsError(source + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw WeightsError(source + ": not a JSON object");
  const std::string type = Fields(j, source).string("model_type", "");
  if (type == "llama") return read_llama(j, source);
  if (type == "diloco-gpt") return read_gpt(j, source);
  throw WeightsError(source + ": model_type \"" + type +
                     "\" is not read: diloco computes Llama-architecture models (model_type \"llama\") and its own "
                     "byte GPT (\"diloco-gpt\")");
}

ModelConfig read_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw WeightsError(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str(), path);
}

std::string hf_config_json(const ModelConfig& c) {
  json j;
  if (c.kind == ModelKind::kGpt) {
    j = {{"architectures", {"DilocoByteGPT"}},
         {"model_type", "diloco-gpt"},
         {"diloco_note", "diloco's byte-level GPT (learned positions, LayerNorm, GELU MLP, biases, tied head): not a "
                         "Hugging Face architecture; diloco eval and diloco sample read it"},
         {"vocab_size", c.vocab}, {"n_embd", c.d_model}, {"n_layer", c.n_layers}, {"n_head", c.n_heads},
         {"n_positions", c.seq_len}, {"torch_dtype", "float32"}};
    return j.dump(2) + "\n";
  }
  if (c.kind != ModelKind::kLlama) throw std::invalid_argument("a TorchScript model has no config.json");
  const int kv = c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads;
  json scaling = nullptr;
  if (c.rope_scaling.type == "llama3")
    scaling = {{"rope_type", "llama3"}, {"factor", c.rope_scaling.factor},
               {"low_freq_factor", c.rope_scaling.low_freq_factor}, {"high_freq_factor", c.rope_scaling.high_freq_factor},
               {"original_max_position_embeddings", c.rope_scaling.original_max_positions}};
  j = {{"architectures", {"LlamaForCausalLM"}},
       {"model_type", "llama"},
       {"hidden_size", c.d_model},
       {"intermediate_size", llama_ffn_hidden(c)},
       {"num_hidden_layers", c.n_layers},
       {"num_attention_heads", c.n_heads},
       {"num_key_value_heads", kv},
       {"head_dim", c.d_model / c.n_heads},
       {"vocab_size", c.vocab},
       {"max_position_embeddings", context_length(c)},
       {"rope_theta", c.rope_theta},
       {"rms_norm_eps", c.norm_eps},
       {"rope_scaling", scaling},
       {"tie_word_embeddings", c.tie_embeddings},
       {"hidden_act", "silu"},
       {"attention_bias", false},
       {"mlp_bias", false},
       {"attention_dropout", 0.0},
       {"initializer_range", 0.02},
       {"use_cache", true},
       {"torch_dtype", "float32"}};
  return j.dump(2) + "\n";
}

}  // namespace diloco::inner

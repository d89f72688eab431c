// Hugging Face's config.json to and from ModelConfig: LlamaForCausalLM (every
// field that changes the function a Llama computes), and the byte GPT's own
// config, which is no Hugging Face architecture. No torch here.
#pragma once

#include <string>

#include "inner/model_config.h"

namespace diloco::inner {

// The context eval and sample use for a folder's model when nothing says
// otherwise: max_position_embeddings, capped (a 128k-token window would
// only cost memory for the windows evaluated here).
inline constexpr int kFolderSeqLenCap = 2048;

// Reads a config.json: model_type "llama" (hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
// rope_theta, rms_norm_eps, tie_word_embeddings, max_position_embeddings,
// rope_scaling of rope_type "llama3") or "diloco-gpt". seq_len becomes
// max_position_embeddings capped at kFolderSeqLenCap. Throws WeightsError
// naming the file and the field for anything diloco would compute
// differently (another rope_scaling, biases, another activation, a head_dim
// that is not hidden_size / num_attention_heads).
ModelConfig read_hf_config(const std::string& path);

// The same from JSON text; `source` names it in messages.
ModelConfig parse_hf_config(const std::string& text, const std::string& source);

// config.json for `c`: LlamaForCausalLM with every field above for llama,
// the byte GPT's own fields (model_type "diloco-gpt") for gpt. Throws
// std::invalid_argument for a TorchScript model (its architecture is
// unknown).
std::string hf_config_json(const ModelConfig& c);

}  // namespace diloco::inner

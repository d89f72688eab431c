// The model factory and the adapters that put each architecture behind Model.
#include "inner/models/model.h"

#include <sstream>
#include <stdexcept>

#include "inner/gpt.h"
#include "inner/models/llama.h"

namespace diloco::inner {
namespace {

std::int64_t count_parameters(const torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// The part of a parameter name up to the layer index after `stack` (or up to
// the first dot elsewhere): "blocks.3.attn.qkv.weight" -> "blocks.3".
std::string layer_prefix(const std::string& name, const std::string& stack) {
  if (name.rfind(stack + ".", 0) == 0) return name.substr(0, name.find('.', stack.size() + 1));
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

// Kind and shapes of each architecture, as a checkpoint signature begins.
std::string describe_gpt(const ModelConfig& c) {
  std::ostringstream out;
  out << "gpt d_model=" << c.d_model << " n_layers=" << c.n_layers << " n_heads=" << c.n_heads
      << " seq_len=" << c.seq_len;
  return out.str();
}

std::string describe_llama(const ModelConfig& c) {
  std::ostringstream out;
  out << "llama vocab=" << c.vocab << " d_model=" << c.d_model << " n_layers=" << c.n_layers
      << " n_heads=" << c.n_heads << " n_kv_heads=" << (c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads)
      << " ffn_hidden=" << llama_ffn_hidden(c) << " tie_embeddings=" << c.tie_embeddings << " seq_len=" << c.seq_len;
  return out.str();
}

// A libtorch module behind Model. `stack` names the module list whose
// entries are layers ("blocks.3"); every other parameter's layer is its
// module ("ln_final").
template <class Net>
class NetModel final : public Model {
 public:
  NetModel(const ModelConfig& c, std::string stack, std::string (*describe)(const ModelConfig&))
      : config_(c), net_(c), stack_(std::move(stack)), describe_(describe) {}
  torch::nn::Module& module() override { return *net_; }
  torch::Tensor logits(const torch::Tensor& tokens) override { return net_->forward(tokens); }
  std::string layer_of(const std::string& p) const override { return layer_prefix(p, stack_); }
  std::string signature() const override { return describe_(config_) + " params=" + std::to_string(count_parameters(*net_)); }
  int vocab() const override { return config_.vocab; }

 private:
  ModelConfig config_;
  Net net_;
  std::string stack_;
  std::string (*describe_)(const ModelConfig&);
};

}  // namespace

torch::Tensor Model::loss(const torch::Tensor& inputs, const torch::Tensor& targets) {
  const auto out = logits(inputs);
  return torch::nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}), targets.reshape({-1}));
}

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  switch (config.kind) {
    // GPT's names: "blocks.3.attn.qkv.weight" is layer "blocks.3".
    case ModelKind::kGpt: return std::make_unique<NetModel<Gpt>>(config, "blocks", describe_gpt);
    // Hugging Face's: "model.layers.3.mlp.up_proj.weight" is layer "model.layers.3".
    case ModelKind::kLlama: return std::make_unique<NetModel<Llama>>(config, "model.layers", describe_llama);
  }
  throw std::invalid_argument("unknown model kind");
}

}  // namespace diloco::inner

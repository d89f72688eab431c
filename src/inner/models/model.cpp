// The model factory and the adapters that put each architecture behind Model.
#include "inner/models/model.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "inner/gpt.h"
#include "inner/models/llama.h"
#include "inner/models/torchscript_model.h"

namespace diloco::inner {
namespace {

std::int64_t count_parameters(const torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
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
  // Named only when they differ from the values every earlier checkpoint
  // was made with, so those still resume.
  if (c.rope_theta != 10000.0) out << " rope_theta=" << c.rope_theta;
  if (c.norm_eps != 1e-5) out << " norm_eps=" << c.norm_eps;
  if (c.max_positions > 0) out << " max_positions=" << c.max_positions;
  const auto& s = c.rope_scaling;
  if (!s.type.empty())
    out << " rope_scaling=" << s.type << "/" << s.factor << "/" << s.low_freq_factor << "/" << s.high_freq_factor << "/"
        << s.original_max_positions;
  return out.str();
}

// A libtorch module behind Model.
template <class Net>
class NetModel final : public Model {
 public:
  NetModel(const ModelConfig& c, std::string (*describe)(const ModelConfig&)) : config_(c), net_(c), describe_(describe) {}
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (auto& item : net_->named_parameters()) out.emplace_back(item.key(), item.value());
    return out;
  }
  void to(const torch::Device& device) override { net_->to(device); }
  void train(bool on) override { net_->train(on); }
  torch::Tensor logits(const torch::Tensor& tokens) override { return net_->forward(tokens); }
  std::string signature() const override { return describe_(config_) + " params=" + std::to_string(count_parameters(*net_)); }
  int vocab() const override { return config_.vocab; }
  int context_length() const override {
    return config_.kind == ModelKind::kLlama ? inner::context_length(config_) : config_.seq_len;
  }
  bool has_kv_cache() const override { return true; }
  torch::Tensor logits_cached(const torch::Tensor& tokens, KvCache& cache) override { return net_->forward(tokens, &cache); }

 private:
  ModelConfig config_;
  Net net_;
  std::string (*describe_)(const ModelConfig&);
};

}  // namespace

std::string Model::layer_of(const std::string& name) const {
  std::size_t start = 0;
  for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
    const std::string part = name.substr(start, dot - start);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return name.substr(0, dot);  // through the module list's index
    start = dot + 1;
  }
  const auto last = name.rfind('.');
  return last == std::string::npos ? name : name.substr(0, last);
}

torch::Tensor Model::logits_cached(const torch::Tensor&, KvCache&) {
  throw std::logic_error("this model has no key/value cache: " + signature());
}

torch::Tensor Model::loss(const torch::Tensor& inputs, const torch::Tensor& targets) {
  const auto out = logits(inputs);
  return torch::nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}), targets.reshape({-1}));
}

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  switch (config.kind) {
    case ModelKind::kGpt: return std::make_unique<NetModel<Gpt>>(config, describe_gpt);
    case ModelKind::kLlama:
      try {
        check_llama_config(config);
      } catch (const std::invalid_argument& e) {
        throw ModelError(e.what());
      }
      return std::make_unique<NetModel<Llama>>(config, describe_llama);
    case ModelKind::kTorchScript: return load_torchscript_model(config);
  }
  throw std::invalid_argument("unknown model kind");
}

}  // namespace diloco::inner

// TorchScript models: loading, the contract check, parameters by name.
#include "inner/models/torchscript_model.h"

#include <torch/script.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace diloco::inner {
namespace {

std::string shape_text(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

class TorchScriptModel final : public Model {
 public:
  explicit TorchScriptModel(const ModelConfig& c) : path_(c.path), vocab_(c.vocab), seq_len_(c.seq_len) {
    const auto fail = [&](const std::string& why) { return ModelError("model.path: " + path_ + ": " + why); };
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path_, ec)) throw fail("no such file");
    try {
      module_ = torch::jit::load(path_, torch::kCPU);
    } catch (const c10::Error& e) {
      throw fail("not a TorchScript file this libtorch (" TORCH_VERSION ") can read: " + first_line(e.what()));
    }
    std::int64_t count = 0;
    std::ostringstream shapes;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      if (!p.value.is_floating_point() || p.value.scalar_type() != torch::kFloat)
        throw fail("parameter " + p.name + " is " + std::string(c10::toString(p.value.scalar_type())) +
                   "; diloco trains float32 parameters");
      p.value.requires_grad_(true);
      count += p.value.numel();
      shapes << p.name << shape_text(p.value) << ";";
    }
    if (count == 0) throw fail("the module has no parameters to train");
    check_contract(fail);
    // What a checkpoint must match: the parameters' names and shapes, not the file's path.
    std::uint64_t h = 1469598103934665603ull;
    for (char ch : shapes.str()) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    std::ostringstream sig;
    sig << "torchscript vocab=" << vocab_ << " layout=" << std::hex << h << std::dec << " params=" << count;
    signature_ = sig.str();
  }

  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) out.emplace_back(p.name, p.value);
    return out;
  }
  void to(const torch::Device& device) override { module_.to(device); }
  void train(bool on) override { module_.train(on); }
  torch::Tensor logits(const torch::Tensor& tokens) override { return module_.forward({tokens}).toTensor(); }
  std::string signature() const override { return signature_; }
  int vocab() const override { return vocab_; }
  int context_length() const override { return seq_len_; }

 private:
  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
  // The TorchScript interpreter's errors end with the Python-style cause
  // ("RuntimeError: index out of range in self") after a traceback.
  static std::string cause(const std::string& s) {
    std::size_t end = s.find_last_not_of(" \n");
    if (end == std::string::npos) return s;
    const std::size_t start = s.rfind('\n', end);
    return s.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
  }

  // forward on [1, 2] ids {0, vocab - 1} must give float32 [1, 2, vocab].
  template <class Fail>
  void check_contract(const Fail& fail) {
    torch::NoGradGuard no_grad;
    const auto tokens = torch::tensor({std::int64_t{0}, std::int64_t{vocab_ - 1}}, torch::kLong).view({1, 2});
    c10::IValue out;
    try {
      out = module_.forward({tokens});
    } catch (const c10::Error& e) {
      throw fail("forward(tokens) failed on int64 ids [1, 2] up to " + std::to_string(vocab_ - 1) +
                 " (model.vocab is " + std::to_string(vocab_) + "): " + cause(e.what()));
    } catch (const std::exception& e) {
      throw fail(std::string("forward(tokens) failed on int64 ids [1, 2] up to ") + std::to_string(vocab_ - 1) +
                 " (model.vocab is " + std::to_string(vocab_) + "): " + cause(e.what()));
    }
    if (!out.isTensor()) throw fail("forward(tokens) must return a tensor of logits, not " + out.tagKind());
    const auto logits = out.toTensor();
    if (logits.scalar_type() != torch::kFloat)
      throw fail("forward(tokens) returned " + std::string(c10::toString(logits.scalar_type())) +
                 " logits; float32 expected");
    if (logits.dim() != 3 || logits.size(0) != 1 || logits.size(1) != 2)
      throw fail("forward(tokens [1, 2]) returned logits of shape " + shape_text(logits) + "; [1, 2, vocab] expected");
    if (logits.size(2) != vocab_)
      throw fail("the module predicts " + std::to_string(logits.size(2)) + " tokens; model.vocab (the data's) is " +
                 std::to_string(vocab_));
  }

  std::string path_;
  int vocab_;
  int seq_len_;
  torch::jit::Module module_;
  std::string signature_;
};

}  // namespace

std::unique_ptr<Model> load_torchscript_model(const ModelConfig& config) {
  return std::make_unique<TorchScriptModel>(config);
}

}  // namespace diloco::inner

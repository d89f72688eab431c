// The seam between the inner loop and what it trains: a model maps token ids
// to logits and owns its parameters in a fixed order, grouped into layers.
// The inner loop, the exchange and checkpoints see only this (and flat
// parameters); no code outside src/inner/models names an architecture.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "inner/model_config.h"
#include "inner/models/kv_cache.h"

namespace diloco::inner {

// A model file or shape that cannot be used (missing, not TorchScript, the
// wrong contract, shapes that do not fit); main maps it to exit code 2. The
// message names the file or key and the problem.
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Model {
 public:
  virtual ~Model() = default;

  // Every parameter with its name, in the order the flat parameter buffer
  // lays them out. The tensors are the model's own: writing them (or
  // re-homing their storage) changes the model.
  virtual std::vector<std::pair<std::string, torch::Tensor>> named_parameters() = 0;
  virtual void to(const torch::Device& device) = 0;
  virtual void train(bool on) = 0;  // dropout and the like; off for evaluation
  // tokens [B, T] int64 -> logits [B, T, vocab].
  virtual torch::Tensor logits(const torch::Tensor& tokens) = 0;
  // The layer a parameter belongs to (consecutive parameters of one layer
  // form one unit of a streaming fragment): by default the name up to the
  // first index of a module list ("blocks.3", "model.layers.3"), else the
  // module that owns it ("ln_final", "model.embed_tokens", "lm_head").
  virtual std::string layer_of(const std::string& parameter) const;
  // Kind and shapes; a checkpoint records it and refuses another model.
  virtual std::string signature() const = 0;
  // Token ids must be below this.
  virtual int vocab() const = 0;
  // The longest sequence the model reads (learned positions end there;
  // rotary ones at max_positions).
  virtual int context_length() const = 0;
  // Incremental decoding (the native models): logits of `tokens` [B, T]
  // that follow cache.length earlier positions, whose keys and values the
  // cache holds; appends theirs. cache.length + T must stay within
  // context_length(). Models without a cache throw std::logic_error.
  virtual bool has_kv_cache() const { return false; }
  virtual torch::Tensor logits_cached(const torch::Tensor& tokens, KvCache& cache);

  // Mean next-token cross-entropy in nats.
  torch::Tensor loss(const torch::Tensor& inputs, const torch::Tensor& targets);
};

// The model `config.kind` names, initialized from the current torch
// generator (seed it first, identically on every rank), or loaded from
// config.path (torchscript). Throws ModelError.
std::unique_ptr<Model> make_model(const ModelConfig& config);

}  // namespace diloco::inner

// The seam between the inner loop and what it trains: a model maps token ids
// to logits and owns its parameters in a fixed order, grouped into layers.
// The inner loop, the exchange and checkpoints see only this (and flat
// parameters); no code outside src/inner/models names an architecture.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "inner/model_config.h"

namespace diloco::inner {

class Model {
 public:
  virtual ~Model() = default;

  // The module that holds every parameter, in the order the flat parameter
  // buffer lays them out (registration order); also moves and mode switches.
  virtual torch::nn::Module& module() = 0;
  // tokens [B, T] int64 -> logits [B, T, vocab].
  virtual torch::Tensor logits(const torch::Tensor& tokens) = 0;
  // The layer a parameter belongs to, by its name in module(): consecutive
  // parameters of one layer form one unit of a streaming fragment.
  virtual std::string layer_of(const std::string& parameter) const = 0;
  // Kind and shapes; a checkpoint records it and refuses another model.
  virtual std::string signature() const = 0;
  // Token ids must be below this.
  virtual int vocab() const = 0;

  // Mean next-token cross-entropy in nats.
  torch::Tensor loss(const torch::Tensor& inputs, const torch::Tensor& targets);
};

// The model `config.kind` names, initialized from the current torch
// generator (seed it first, identically on every rank). Throws
// std::invalid_argument for shapes the kind cannot build.
std::unique_ptr<Model> make_model(const ModelConfig& config);

}  // namespace diloco::inner

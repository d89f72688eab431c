// The inner optimizer: AdamW on every parameter, or Muon on the hidden
// weight matrices and AdamW on the rest (embeddings, the output head, norms,
// biases), as MuLoCo trains DiLoCo's inner steps.
//
// Muon, per hidden matrix W (rows x cols) with gradient G, learning rate lr
// and weight decay wd:
//   B <- mu B + G                        (momentum, mu = inner.muon_momentum)
//   U <- G + mu B                        (Nesterov)
//   O <- NS5(U)                          (Newton-Schulz: X = U / (||U||_F + 1e-7),
//                                         transposed when rows > cols; five times
//                                         A = X X^T, X <- a X + (b A + c A A) X with
//                                         a, b, c = 3.4445, -4.7750, 2.0315)
//   W <- W (1 - lr wd) - lr 0.2 sqrt(max(rows, cols)) O
// The factor 0.2 sqrt(max(rows, cols)) gives the update about AdamW's RMS
// (Moonshot's Muon), so both groups share inner.lr and its schedule.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "inner/inner_loop.h"

namespace diloco::inner {

// Muon's orthogonalization of `g` (2-D): five quintic Newton-Schulz steps.
torch::Tensor newton_schulz5(const torch::Tensor& g);

// A parameter that Muon trains: a matrix that is neither an embedding nor
// the output head (by name: "embed", "lm_head", "head.").
bool muon_trains(const std::string& name, const torch::Tensor& p);

class InnerOptimizer {
 public:
  // Takes the parameters with their gradients attached (p.grad()).
  InnerOptimizer(const InnerOptimConfig& config, const std::vector<std::pair<std::string, torch::Tensor>>& params);
  InnerOptimizer(const InnerOptimizer&) = delete;
  InnerOptimizer& operator=(const InnerOptimizer&) = delete;

  // One update from the current gradients at learning rate `lr`.
  void step(double lr);

  // The state (AdamW's moments, Muon's momentum) into and out of a
  // checkpoint's archive; load throws std::runtime_error naming what does not
  // fit (another optimizer, another model).
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  void adamw_step(torch::Tensor& p, const torch::optim::AdamWOptions& options);

  struct Matrix {
    torch::Tensor param;
    torch::Tensor momentum;
    double scale = 1.0;  // 0.2 sqrt(max(rows, cols))
  };
  InnerOptimConfig config_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
  std::vector<Matrix> muon_;
};

}  // namespace diloco::inner

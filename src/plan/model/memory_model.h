// The planner's model of one rank's memory (no torch, no MPI): what the inner
// steps hold on the model's device and what the process holds on the host.
//
// Device: fp32 weights, gradients and AdamW's two moments (4 + 4 + 8 bytes a
// parameter; with inner.optimizer = "muon" the parameters Muon trains keep
// one momentum buffer instead, 4 bytes, its Newton-Schulz scratch passing
// after the activations are freed); under bf16 autocast also the bf16 copies of the weights it
// caches (2 bytes a parameter) and the activations autograd saves, counted
// tensor by tensor from the models' forward passes (activation_bytes).
// Host: the runtime (libtorch after its lazy start, MPI, the process: each
// rank's as `probe --all-ranks` measured it, else the planning process's
// own), the tokens in memory, and on
// a site leader the outer state: global parameters, the pseudo-gradient in
// flight, the outer momentum, the error-feedback residual of a lossy codec,
// the round-start copy of delayed overlap, and the exchange's payloads (its
// own and every site's part being received).
//
// A CPU rank's peak RSS holds more than it uses: the host block cache
// (inner/host_block_cache.h) keeps freed blocks for the next step, and at
// the step's peak in use it still holds the blocks the backward pass alone
// asks for. Those are a layer's size, and each layer's backward reuses the
// one before's, so what is kept does not grow with depth: measured on 9
// models (BENCHMARKS.md section 12, GPT and Llama, 2 to 8 layers) it was
// about two layers' worth of the activations autograd saves (0.26 of them
// at 8 layers, 0.96 at 4 for Llama, whose layers save more). The model adds
// min(1, 2 / layers) of the activations (`allocator`). A GPU's caching
// allocator keeps blocks too; that is not modelled (no GPU run measured it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "diloco/compression/codec.h"

#include "inner/model_config.h"

namespace diloco::plan {

struct MemoryInputs {
  inner::ModelConfig model;
  double params = 0;                 // parameters (counted or loaded)
  double muon_params = 0;            // of those, what Muon trains (inner.optimizer = "muon"); 0: AdamW's all
  int batch = 1;                     // sequences per rank per inner step
  bool bf16 = false;                 // inner.precision = "bf16" (autocast, fp32 master weights)
  bool cuda = false;                 // the model on a GPU: device and host memory apart
  bool leader = true;                // a site leader holds the outer state
  std::string codec = "none";
  compression::CodecConfig codec_settings;  // the recipe's block, top-k ratio and bits
  bool error_feedback = false;
  bool momentum = true;              // the outer optimizer keeps a momentum buffer
  std::string overlap = "none";      // "none", "delayed", "streaming"
  int fragments = 1;                 // streaming: fragments synced in turn
  int sites = 2;
  double part_bytes = 8 << 20;       // the all-gather's part size (the exchange's default)
  double runtime_bytes = 0;          // the process before any model
  double data_bytes = 0;             // tokens held in memory
};

struct MemoryEstimate {
  // On the model's device.
  double weights = 0, grads = 0, adam = 0, autocast = 0, activations = 0;  // adam: the inner optimizer's state
  bool activations_known = true;  // a TorchScript module's are not
  // On the host.
  double runtime = 0, data = 0, outer = 0, exchange = 0;
  double allocator = 0;  // a CPU rank: what the host block cache keeps of freed activations
  bool cuda = false;
  double device() const { return weights + grads + adam + autocast + activations; }
  double host() const { return runtime + data + outer + exchange + allocator; }
  // One rank's peak: the host's and the GPU's apart on CUDA, together on the CPU.
  double total() const { return cuda ? host() : host() + device(); }
};

// Bytes autograd holds at the peak of one inner step (forward's saved
// tensors of every layer, the logits and their gradient) for `batch`
// sequences of model.seq_len; negative when unknown (TorchScript).
double activation_bytes(const inner::ModelConfig& model, int batch, bool bf16);

MemoryEstimate estimate_memory(const MemoryInputs& in);

// Whether a run of `codec` keeps an error-feedback residual when the recipe
// (validated: compression.error_feedback resolved) named `recipe_codec`:
// a lossy recipe codec carries its setting over; with codec "none" the
// recipe's false is only the default for "none", and a lossy codec set on
// top of it (the plan's flags) turns feedback on, as validation does.
bool error_feedback_for(const std::string& codec, const std::string& recipe_codec, bool recipe_error_feedback);

// Bytes the tokens of data.paths take in memory. Text and byte corpora are
// held as 4-byte ids (at most one per byte of text). Token shards are not
// held: the loader keeps each shard's descriptor and reads every window with
// pread into a buffer (`batch` windows of seq_len + 1 ids a step, as read and
// as the int64 batch), so a 10 GB shard set costs what a 10 MB one does. A
// folder counts the files its loader reads; files that cannot be read count 0.
double data_bytes_of(const std::vector<std::string>& paths, bool shards, int batch, int seq_len);

// This process's resident memory now, in bytes (0 where unknown).
double resident_bytes();

// What to change so `e` fits in `limit` bytes (one line, empty when it
// fits): the largest batch that fits, bf16 on a GPU, or that the model's
// fixed state alone is too large.
std::string memory_advice(const MemoryInputs& in, const MemoryEstimate& e, double limit);

}  // namespace diloco::plan

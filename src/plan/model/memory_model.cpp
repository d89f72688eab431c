// The planner's memory model (see plan_memory.h).
#include "plan/model/memory_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>

#include "plan/model/round_model.h"

namespace diloco::plan {
namespace {

// Bytes one token leaves saved per layer, and per layer and key position
// (the attention scores), as autograd keeps them; from the forward passes in
// gpt.cpp and models/llama.cpp. fp32: 4 bytes a value. bf16 autocast: the
// matrix products' inputs (cast copies) and outputs are 2 bytes, LayerNorm,
// RMSNorm, softmax and the residual stream stay 4.
struct LayerBytes {
  double per_d = 0;       // times d_model
  double per_score = 0;   // times n_heads * seq_len
};

LayerBytes gpt_layer(bool bf16) {
  // fp32, in d-sized vectors: ln1 input and output, q, k, v copied for the
  // batched products, the heads' output copied for proj, ln2 input and
  // output, fc output (4d, kept by GELU), GELU output (4d): 16. Scores: the
  // softmax output.
  if (!bf16) return {16 * 4.0, 4.0};
  // bf16: ln1 in 4 + qkv input copy 2 + q, k, v 6 + y 2 + proj input 2 + ln2 in
  // 4 + fc input copy 2 + fc out 8 + GELU out 8 = 38; scores: softmax out 4
  // plus its bf16 copy 2.
  return {38.0, 6.0};
}

LayerBytes llama_layer(const inner::ModelConfig& m, bool bf16) {
  const double g = static_cast<double>(m.n_kv_heads > 0 ? m.n_kv_heads : m.n_heads) / m.n_heads;
  const double f = static_cast<double>(inner::llama_ffn_hidden(m)) / m.d_model;
  // fp32: two RMSNorms (input, normalized, scaled: 3 each), q (projection,
  // rotated half, copy for the product: 3), k (2g + copy 1), v copy 1, heads'
  // output copy 1, SwiGLU (gate, silu, up, product: 4f).
  if (!bf16) return {4.0 * (12.0 + 2.0 * g + 4.0 * f), 4.0};
  // bf16: norms in fp32 (24), bf16 input copies of q/k/v and gate/up (6 + 4),
  // q 6, k 4g + 2, v 2, y 2, SwiGLU 8f; scores: softmax out 4 + bf16 copy 2.
  return {46.0 + 4.0 * g + 8.0 * f, 6.0};
}

double payload_bytes(const MemoryInputs& in, double values) {
  return static_cast<double>(
      plan_codec(in.codec, in.codec_settings)->payload_size(static_cast<std::size_t>(values)));
}

std::string mb(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f MB", bytes / 1e6);
  return text;
}

}  // namespace

// What the host block cache keeps at a CPU rank's peak, in layers' worth of
// the activations (memory_model.h).
constexpr double kKeptLayers = 2.0;

double activation_bytes(const inner::ModelConfig& m, int batch, bool bf16) {
  if (m.kind == inner::ModelKind::kTorchScript) return -1.0;
  const double tokens = static_cast<double>(batch) * m.seq_len;
  const LayerBytes layer = m.kind == inner::ModelKind::kGpt ? gpt_layer(bf16) : llama_layer(m, bf16);
  const double blocks =
      m.n_layers * tokens * (layer.per_d * m.d_model + layer.per_score * m.n_heads * m.seq_len);
  // The ends: the final norm (GPT: input and output; Llama: 3 as above; bf16
  // adds the head's input copy), then the logits, log-softmax's output and the
  // logits' gradient (fp32; bf16 adds the logits' own 2-byte copy).
  const double norm = (m.kind == inner::ModelKind::kGpt ? 8.0 : 12.0) + (bf16 ? 2.0 : 0.0);
  const double head = bf16 ? 14.0 : 12.0;
  return blocks + tokens * (norm * m.d_model + head * m.vocab);
}

MemoryEstimate estimate_memory(const MemoryInputs& in) {
  MemoryEstimate e;
  const double p = in.params;
  e.cuda = in.cuda;
  e.weights = 4.0 * p;
  e.grads = 4.0 * p;
  e.adam = 8.0 * (p - in.muon_params) + 4.0 * in.muon_params;
  e.autocast = in.bf16 ? 2.0 * p : 0.0;
  e.activations = activation_bytes(in.model, in.batch, in.bf16);
  e.activations_known = e.activations >= 0.0;
  e.activations = std::max(0.0, e.activations);
  e.allocator = in.cuda ? 0.0 : std::min(1.0, kKeptLayers / std::max(1, in.model.n_layers)) * e.activations;
  e.runtime = in.runtime_bytes;
  e.data = in.data_bytes;
  if (in.cuda) e.outer += 4.0 * p;  // the host copy the inner steps stage parameters through
  if (!in.leader) return e;
  // Global parameters and the pseudo-gradient (all fragments together).
  e.outer += 8.0 * p;
  if (in.momentum) e.outer += 4.0 * p;
  const bool lossy = in.codec != "none";
  if (lossy && in.error_feedback) e.outer += 4.0 * p;
  if (in.overlap == "delayed") e.outer += 4.0 * p;
  if (in.sites < 2) return e;
  // The exchange of the largest fragment: its own payload and one part of
  // every site's (top-k: whole payloads, and a value-sized selection buffer).
  const double values = in.overlap == "streaming" ? p / std::max(1, in.fragments) : p;
  const double whole = payload_bytes(in, values);
  const double part = in.codec == "topk" ? whole : std::min(whole, in.part_bytes);
  e.exchange = whole + in.sites * part + (in.codec == "topk" ? 4.0 * values : 0.0);
  return e;
}

bool error_feedback_for(const std::string& codec, const std::string& recipe_codec, bool recipe_error_feedback) {
  if (codec == "none") return false;
  return recipe_codec == "none" ? true : recipe_error_feedback;
}

double data_bytes_of(const std::vector<std::string>& paths, bool shards, int batch, int seq_len) {
  namespace fs = std::filesystem;
  double bytes = 0, files = 0;
  std::error_code ec;
  const auto add = [&](const fs::path& p) {
    bytes += static_cast<double>(fs::file_size(p, ec));
    files += 1;
  };
  for (const auto& p : paths) {
    if (fs::is_directory(p, ec)) {
      // The files the loaders read from a folder: token shards its *.bin files,
      // text its regular files that are not links.
      for (const auto& entry : fs::directory_iterator(p, ec))
        if (entry.is_regular_file(ec) && (shards ? entry.path().extension() == ".bin" : !entry.is_symlink(ec)))
          add(entry.path());
    } else if (fs::is_regular_file(p, ec)) {
      add(p);
    }
  }
  if (!shards) return 4.0 * bytes;
  // Per shard its descriptor, path and start offset; per step the windows
  // as read (at most 4 bytes an id) and as the int64 batch.
  constexpr double kPerShard = 256.0;
  return files * kPerShard + static_cast<double>(batch) * (seq_len + 1) * (4.0 + 8.0);
}

double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0.0;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

std::string memory_advice(const MemoryInputs& in, const MemoryEstimate& e, double limit) {
  const double need = e.cuda ? e.device() : e.total();
  if (limit <= 0.0 || need <= limit) return {};
  const double per_batch = e.activations + (e.cuda ? 0.0 : e.allocator);  // both grow with the batch
  const double per_sequence = per_batch / std::max(1, in.batch);
  const double fixed = need - per_batch;
  std::string advice;
  if (per_sequence > 0.0 && fixed < limit) {
    const int fits = static_cast<int>(std::floor((limit - fixed) / per_sequence));
    if (fits >= 1) advice = "data.batch_size = " + std::to_string(fits) + " fits";
  }
  if (in.cuda && !in.bf16) {
    MemoryInputs half = in;
    half.bf16 = true;
    const auto h = estimate_memory(half);
    if (h.device() <= limit) advice += std::string(advice.empty() ? "" : "; ") + "inner.precision = \"bf16\" fits";
  }
  if (advice.empty())
    advice = "the weights, gradients and AdamW state alone need " + mb(fixed) + ": more ranks per site cannot "
             "split them (each rank holds the whole model); a smaller model";
  return "does not fit in " + mb(limit) + ": " + advice;
}

}  // namespace diloco::plan

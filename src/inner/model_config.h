// Sizes of the byte-level GPT; kept apart from gpt.h so readers need no torch.
#pragma once

namespace diloco::inner {

struct ModelConfig {
  int vocab = 256;  // bytes
  int d_model = 128;
  int n_layers = 2;
  int n_heads = 4;
  int seq_len = 64;  // context length
};

}  // namespace diloco::inner

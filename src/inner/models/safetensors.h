// The safetensors format (Hugging Face's weight files): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range (and an optional "__metadata__" object), then the raw
// little-endian data. Read through a memory map; nothing here needs torch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace diloco::inner {

// A weight file (or checkpoint used as one) that cannot be read or does not
// fit the model; main maps it to exit code 2. The message names the file.
class WeightsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class SafetensorsFile {
 public:
  struct Tensor {
    std::string dtype;  // "F32", "F16", "BF16", ...
    std::vector<std::int64_t> shape;
    std::span<const std::byte> data;
  };

  // Maps `path` and checks the header against the file: every byte range
  // inside the data, matching its dtype and shape, no two overlapping.
  // Throws WeightsError naming the file and the tensor at fault.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

  // The tensor as fp32 (F32, F16 and BF16 convert exactly); throws
  // WeightsError for other dtypes.
  std::vector<float> to_floats(const std::string& name) const;

 private:
  void unmap();  // a constructor that throws unmaps first (no destructor runs)
  std::string path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> values;  // F32
};

// Writes `tensors` as F32 through a temporary file and a rename. Throws
// WeightsError.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace diloco::inner

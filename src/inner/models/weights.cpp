// Weights in and out by parameter name.
#include "inner/models/weights.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "inner/models/hf_folder.h"

namespace diloco::inner {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// "a, b, c and 4 more" for the first `shown` of `items`.
std::string first_few(const std::vector<std::string>& items, std::size_t shown = 5) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > shown) out += " and " + std::to_string(items.size() - shown) + " more";
  return out;
}

}  // namespace

std::vector<ParameterShape> parameter_layout(Model& model) {
  std::vector<ParameterShape> out;
  for (const auto& [name, p] : model.named_parameters())
    out.push_back({name, std::vector<std::int64_t>(p.sizes().begin(), p.sizes().end())});
  return out;
}

void load_weights(Model& model, const SafetensorsFile& file) { load_weights(model, {&file}, file.path()); }

void load_weights(Model& model, const std::string& path) {
  if (!is_model_folder(path)) {
    const SafetensorsFile file(path);
    load_weights(model, file);
    return;
  }
  const auto files = open_folder_weights(path);
  std::vector<const SafetensorsFile*> views;
  for (const auto& f : files) views.push_back(f.get());
  load_weights(model, views, path);
}

void load_weights(Model& model, const std::vector<const SafetensorsFile*>& files, const std::string& source) {
  std::map<std::string, SafetensorsFile::Tensor> tensors;
  std::map<std::string, const SafetensorsFile*> owner;
  for (const auto* file : files)
    for (const auto& [name, t] : file->tensors()) {
      if (owner.count(name)) throw WeightsError(source + ": tensor " + name + " is in " + owner[name]->path() + " and " + file->path());
      tensors.emplace(name, t);
      owner[name] = file;
    }
  std::vector<std::string> missing, mismatched, unexpected;
  const auto layout = parameter_layout(model);
  for (const auto& p : layout) {
    auto it = tensors.find(p.name);
    if (it == tensors.end()) missing.push_back(p.name);
    else if (it->second.shape != p.shape)
      mismatched.push_back(p.name + " (file " + shape_text(it->second.shape) + ", model " + shape_text(p.shape) + ")");
  }
  for (const auto& [name, t] : tensors) {
    const bool known = std::any_of(layout.begin(), layout.end(), [&](const ParameterShape& p) { return p.name == name; });
    if (!known) unexpected.push_back(name == "lm_head.weight" ? name + " (the model ties its head to the embedding: "
                                                                      "model.tie_embeddings = false takes it)"
                                                              : name);
  }
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string why = source + " does not fit the model";
    if (!mismatched.empty()) why += "; shapes differ: " + first_few(mismatched);
    if (!missing.empty()) why += "; missing: " + first_few(missing);
    if (!unexpected.empty()) why += "; unexpected: " + first_few(unexpected);
    throw WeightsError(why);
  }
  // Every dtype is checked before the first tensor is written; then one
  // tensor at a time is converted and copied, so a model's worth of fp32
  // copies is never held at once (a Hugging Face model of billions of
  // parameters would need it twice over).
  for (const auto& p : layout) {
    const auto& dtype = tensors.at(p.name).dtype;
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
      throw WeightsError(owner.at(p.name)->path() + ": tensor '" + p.name + "' is " + dtype +
                         "; weights must be F32, F16 or BF16");
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    auto v = owner.at(name)->to_floats(name);
    p.copy_(torch::from_blob(v.data(), p.sizes(), torch::kFloat));
  }
}

}  // namespace diloco::inner

// model.init_from and `diloco export`.
#include "app/weights.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "inner/models/model.h"
#include "inner/models/safetensors.h"
#include "inner/models/weights.h"
#include "outer/checkpoint.h"
#include "outer/trainer.h"

namespace diloco::app {

void init_weights(const Recipe& recipe, inner::InnerLoop& loop) {
  const std::string& from = recipe.model_source.init_from;
  if (from.empty()) return;
  const std::string key = "model.init_from: ";
  if (!std::filesystem::is_directory(from)) {
    try {
      loop.load_weights(from);
    } catch (const inner::WeightsError& e) {
      throw inner::WeightsError(key + e.what());
    }
    return;
  }
  // Another run's checkpoint: its global parameters, for the same model.
  std::string signature;
  std::vector<float> global;
  try {
    if (const auto problem = outer::CheckpointStore::verify(from); !problem.empty())
      throw outer::CheckpointError(from + " does not verify: " + problem);
    global = outer::Trainer::global_params_of(from, signature);
  } catch (const outer::CheckpointError& e) {
    throw inner::WeightsError(key + e.what());
  }
  if (signature != loop.model_signature())
    throw inner::WeightsError(key + from + " holds a model of " + signature + "; the recipe builds " +
                              loop.model_signature());
  auto params = loop.params();
  std::copy(global.begin(), global.end(), params.begin());
}

int run_export(int argc, char** argv) {
  const char* usage = "usage: diloco export CHECKPOINT --format safetensors --out FILE\n"
                      "Write a checkpoint's global parameters as a safetensors file, named as the model names them\n"
                      "(Hugging Face's Llama layout for model.kind = \"llama\").\n";
  std::string checkpoint, format, out;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    }
    if ((a == "--format" || a == "--out") && i + 1 < argc) (a == "--format" ? format : out) = argv[++i];
    else if (a.rfind("-", 0) != 0 && checkpoint.empty()) checkpoint = a;
    else {
      std::cerr << "diloco: error: export: unexpected argument '" << a << "'\n" << usage;
      return 2;
    }
  }
  if (checkpoint.empty() || out.empty()) {
    std::cerr << "diloco: error: export needs a checkpoint and --out\n" << usage;
    return 2;
  }
  if (!format.empty() && format != "safetensors") {
    std::cerr << "diloco: error: export: --format " << format << ": only safetensors is written\n";
    return 2;
  }
  try {
    if (const auto problem = outer::CheckpointStore::verify(checkpoint); !problem.empty())
      throw outer::CheckpointError(checkpoint + " does not verify: " + problem);
    // The checkpoint's own recipe says which model its parameters belong to.
    const std::string recipe_path = checkpoint + "/recipe.toml";
    const Recipe recipe = parse_recipe(outer::CheckpointStore::read_file(recipe_path), recipe_path, {});
    std::string signature;
    const auto global = outer::Trainer::global_params_of(checkpoint, signature);
    auto model = inner::make_model(recipe.model);
    if (model->signature() != signature)
      throw outer::CheckpointError(checkpoint + " holds a model of " + signature + "; its recipe.toml builds " +
                                   model->signature());
    std::vector<inner::NamedTensor> tensors;
    std::size_t offset = 0;
    for (const auto& p : inner::parameter_layout(*model)) {
      std::size_t count = 1;
      for (auto d : p.shape) count *= static_cast<std::size_t>(d);
      tensors.push_back({p.name, p.shape, std::span<const float>(global).subspan(offset, count)});
      offset += count;
    }
    const std::map<std::string, std::string> metadata{
        {"format", "pt"}, {"diloco_model", signature},
        {"diloco_round", std::to_string(outer::CheckpointStore::round_of(checkpoint))}};
    inner::write_safetensors(out, tensors, metadata);
    std::cout << "wrote " << tensors.size() << " tensors (" << global.size() << " parameters) to " << out << "\n";
  } catch (const outer::CheckpointError& e) {
    std::cerr << "diloco: error: export: " << e.what() << std::endl;
    return 2;
  } catch (const RecipeError& e) {
    std::cerr << "diloco: error: export: " << e.what() << std::endl;
    return 2;
  } catch (const inner::WeightsError& e) {
    std::cerr << "diloco: error: export: " << e.what() << std::endl;
    return 2;
  }
  return 0;
}

}  // namespace diloco::app

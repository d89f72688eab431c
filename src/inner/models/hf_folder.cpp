// Model folders in and out: the sharded-index format Hugging Face writes
// (weight_map from tensor name to file), written through a temporary folder.
#include "inner/models/hf_folder.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace diloco::inner {
namespace fs = std::filesystem;
namespace {

constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kSingle = "model.safetensors";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw WeightsError(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw WeightsError("cannot write " + path + " (disk full or not writable?)");
}

// Tensors grouped into shards of at most `max_bytes` each, in order.
std::vector<std::vector<NamedTensor>> shard(const std::vector<NamedTensor>& tensors, std::uint64_t max_bytes) {
  std::vector<std::vector<NamedTensor>> out(1);
  std::uint64_t bytes = 0;
  for (const auto& t : tensors) {
    if (!out.back().empty() && bytes + t.values.size_bytes() > max_bytes) {
      out.emplace_back();
      bytes = 0;
    }
    out.back().push_back(t);
    bytes += t.values.size_bytes();
  }
  return out;
}

}  // namespace

bool is_model_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

std::vector<std::unique_ptr<SafetensorsFile>> open_folder_weights(const std::string& folder) {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  const fs::path dir(folder);
  std::error_code ec;
  if (!fs::exists(dir / kIndex, ec)) {
    if (!fs::exists(dir / kSingle, ec))
      throw WeightsError(folder + ": holds neither " + kSingle + " nor " + kIndex);
    files.push_back(std::make_unique<SafetensorsFile>((dir / kSingle).string()));
    return files;
  }
  const std::string index_path = (dir / kIndex).string();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(read_text(index_path));
  } catch (const nlohmann::json::exception& e) {
    throw WeightsError(index_path + ": not JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    throw WeightsError(index_path + ": weight_map (tensor name -> file) is missing");
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    if (!file.is_string()) throw WeightsError(index_path + ": weight_map." + name + " must name a file");
    const auto f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      throw WeightsError(index_path + ": weight_map." + name + " names \"" + f + "\", not a file in the folder");
    by_file[f].push_back(name);
  }
  for (const auto& [file, names] : by_file) {
    files.push_back(std::make_unique<SafetensorsFile>((dir / file).string()));
    for (const auto& name : names)
      if (!files.back()->tensors().count(name))
        throw WeightsError(index_path + ": maps " + name + " to " + file + ", which does not hold it");
  }
  return files;
}

std::vector<std::string> write_model_folder(const std::string& out, const ModelFolder& folder) {
  const fs::path target = fs::absolute(fs::path(out)).lexically_normal();
  std::error_code ec;
  if (fs::exists(target, ec) && !is_model_folder(target.string()))
    throw WeightsError(out + ": exists and is not a model folder (no config.json); choose another --out");
  const fs::path tmp = target.parent_path() / (target.filename().string() + ".partial-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) || ec) throw WeightsError("cannot create " + tmp.string() + ": " + ec.message());
  std::vector<std::string> written;
  try {
    write_text((tmp / "config.json").string(), folder.config_json);
    written.push_back("config.json");
    const auto shards = shard(folder.tensors, folder.max_shard_bytes);
    if (shards.size() == 1) {
      write_safetensors((tmp / kSingle).string(), shards[0], folder.metadata);
      written.push_back(kSingle);
    } else {
      nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
      std::uint64_t total = 0;
      for (std::size_t i = 0; i < shards.size(); ++i) {
        char name[64];
        std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
        write_safetensors((tmp / name).string(), shards[i], folder.metadata);
        written.push_back(name);
        for (const auto& t : shards[i]) {
          index["weight_map"][t.name] = name;
          total += t.values.size_bytes();
        }
      }
      index["metadata"]["total_size"] = total;
      write_text((tmp / kIndex).string(), index.dump(2) + "\n");
      written.push_back(kIndex);
    }
    if (!folder.tokenizer_model.empty()) {
      fs::copy_file(folder.tokenizer_model, tmp / "tokenizer.model", ec);
      if (ec) throw WeightsError("cannot copy " + folder.tokenizer_model + ": " + ec.message());
      written.push_back("tokenizer.model");
      // diloco's runs encode text without BOS or EOS ids, so a Hugging Face
      // tokenizer that added them would feed the model what it never saw.
      const nlohmann::json tokenizer_config = {{"tokenizer_class", "LlamaTokenizer"}, {"add_bos_token", false},
                                               {"add_eos_token", false}, {"unk_token", "<unk>"},
                                               {"bos_token", "<s>"}, {"eos_token", "</s>"}};
      write_text((tmp / "tokenizer_config.json").string(), tokenizer_config.dump(2) + "\n");
      written.push_back("tokenizer_config.json");
    }
    // The old folder moves aside only once the new one is whole.
    const fs::path old = target.parent_path() / (target.filename().string() + ".old-" + std::to_string(::getpid()));
    const bool replace = fs::exists(target, ec);
    if (replace) fs::rename(target, old);
    fs::rename(tmp, target);
    if (replace) fs::remove_all(old, ec);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw WeightsError(std::string("cannot write ") + out + ": " + e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return written;
}

}  // namespace diloco::inner

// Flags, device, text codec and error mapping for eval and sample.
#include "app/use_support.h"

#include <iostream>

#include "app/launch_env.h"
#include "app/recipe.h"
#include "comm/comm_error.h"
#include "inner/data/dataset.h"
#include "inner/inner_loop.h"
#include "inner/models/model.h"
#include "inner/models/safetensors.h"
#include "outer/checkpoint.h"

namespace diloco::app {

std::string UseFlags::text(const std::string& name, const std::string& fallback) const {
  const auto it = values.find(name);
  if (it == values.end()) return fallback;
  if (it->second.size() != 1) throw FlagError("--" + name + " is given more than once");
  return it->second[0];
}

long long UseFlags::integer(const std::string& name, long long fallback, long long lo, long long hi) const {
  const std::string v = text(name, "");
  if (v.empty()) return fallback;
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < lo || n > hi)
    throw FlagError("--" + name + " " + v + ": expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return n;
}

double UseFlags::number(const std::string& name, double fallback, double lo, double hi) const {
  const std::string v = text(name, "");
  if (v.empty()) return fallback;
  std::size_t used = 0;
  double x = 0.0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(x >= lo && x <= hi))
    throw FlagError("--" + name + " " + v + ": expected a number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return x;
}

UseFlags parse_use_flags(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& multi,
                         const std::set<std::string>& switches) {
  UseFlags f;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      f.help = true;
      return f;
    }
    const std::string name = a.rfind("--", 0) == 0 ? a.substr(2) : "";
    if (switches.count(name)) {
      f.switches.insert(name);
    } else if (valued.count(name)) {
      if (i + 1 >= argc) throw FlagError(a + " needs a value");
      f.values[name].push_back(argv[++i]);
      while (multi.count(name) && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        f.values[name].push_back(argv[++i]);
    } else if (a.rfind("-", 0) != 0 && f.model.empty()) {
      f.model = a;
    } else {
      throw FlagError("unexpected argument '" + a + "'");
    }
  }
  if (f.model.empty()) throw FlagError("needs a checkpoint or model folder");
  return f;
}

torch::Device pick_device(const std::string& setting, int local_rank) {
  const auto s = setting == "cpu" ? inner::DeviceSetting::kCpu
                 : setting == "cuda" ? inner::DeviceSetting::kCuda
                 : setting == "auto" ? inner::DeviceSetting::kAuto
                                     : throw FlagError("--device " + setting + ": expected cpu, cuda or auto");
  try {
    const auto d = inner::choose_device(s, inner::cuda_device_count(), local_rank);
    return d.cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(d.index)) : torch::Device(torch::kCPU);
  } catch (const std::invalid_argument& e) {
    throw FlagError(std::string("--device: ") + e.what());
  }
}

TextCodec::TextCodec(const SavedModel& m, const std::string& override_path) {
  path_ = override_path.empty() ? m.tokenizer : override_path == "bytes" ? "" : override_path;
  if (!path_.empty()) {
    tokenizer_ = std::make_unique<inner::Tokenizer>(path_);
    if (tokenizer_->vocab_size() > m.model->vocab())
      throw FlagError("tokenizer " + path_ + " has " + std::to_string(tokenizer_->vocab_size()) +
                      " pieces, more than the model's vocabulary (" + std::to_string(m.model->vocab()) + ")");
  } else if (m.text_format == inner::DataFormat::kTokens && override_path != "bytes") {
    throw FlagError(m.source + ": which tokenizer made its ids is unknown (no tokenizer.model; tokenizer.json is not "
                    "read); give --tokenizer M (a SentencePiece model) or --tokenizer bytes");
  }
}

std::vector<std::int64_t> TextCodec::encode(const std::string& text) const {
  if (!tokenizer_) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    return std::vector<std::int64_t>(bytes, bytes + text.size());
  }
  std::vector<std::uint32_t> ids;
  tokenizer_->encode(text, ids);
  return std::vector<std::int64_t>(ids.begin(), ids.end());
}

std::string TextCodec::decode(const std::vector<std::int64_t>& ids) const {
  if (tokenizer_) return tokenizer_->decode(std::vector<std::uint32_t>(ids.begin(), ids.end()));
  std::string out;
  for (auto id : ids) out += id < 256 ? static_cast<char>(id) : '?';
  return out;
}

std::string TextCodec::describe() const { return tokenizer_ ? "SentencePiece " + path_ : "bytes"; }

int run_guarded(const std::string& command, const std::function<int()>& body, bool every_rank) {
  const auto fail = [&](int code, const std::string& what) {
    if (code != 2 || every_rank || is_launch_root()) std::cerr << "diloco: error: " << command << ": " << what << std::endl;
    return code;
  };
  try {
    return body();
  } catch (const FlagError& e) {
    return fail(2, std::string(e.what()) + " (see diloco " + command + " --help)");
  } catch (const inner::WeightsError& e) {
    return fail(2, e.what());
  } catch (const inner::ModelError& e) {
    return fail(2, e.what());
  } catch (const inner::DataError& e) {
    return fail(2, e.what());
  } catch (const outer::CheckpointError& e) {
    return fail(2, e.what());
  } catch (const RecipeError& e) {
    return fail(2, e.what());
  } catch (const comm::CommError& e) {
    return fail(3, e.what());
  } catch (const std::invalid_argument& e) {  // a bad value from the environment (DILOCO_HOST_BLOCK_CACHE)
    return fail(2, e.what());
  } catch (const std::exception& e) {
    return fail(1, std::string("internal error: ") + e.what());
  }
}

}  // namespace diloco::app

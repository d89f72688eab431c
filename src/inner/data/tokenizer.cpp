// The SentencePiece wrapper: loads the SentencePiece module (see
// sentencepiece_module.cpp for why it is a module) once, on first use.
#include "inner/data/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "inner/data/dataset.h"

namespace diloco::inner {
namespace {

constexpr std::size_t kErrorLen = 1024;

struct Module {
  void* (*load)(const char*, char*, std::size_t) = nullptr;
  void (*free)(void*) = nullptr;
  int (*pieces)(void*) = nullptr;
  int (*encode)(void*, const char*, std::size_t, void (*)(void*, const int*, std::size_t), void*, char*,
                std::size_t) = nullptr;
  int (*train)(const char* const*, const char* const*, std::size_t, char*, std::size_t) = nullptr;
  int (*decode)(void*, const int*, std::size_t, void (*)(void*, const char*, std::size_t), void*, char*,
                std::size_t) = nullptr;
};

// Next to the running executable first (an installed layout), else where
// the build put it.
std::string module_path() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = exe.parent_path() / DILOCO_SENTENCEPIECE_MODULE_NAME;
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return DILOCO_SENTENCEPIECE_MODULE;
}

const Module& module() {
  static Module m;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string path = module_path();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      const char* why = dlerror();
      error = "cannot load the SentencePiece module " + path + ": " + (why ? why : "unknown error");
      return;
    }
    m.load = reinterpret_cast<decltype(m.load)>(dlsym(handle, "diloco_spm_load"));
    m.free = reinterpret_cast<decltype(m.free)>(dlsym(handle, "diloco_spm_free"));
    m.pieces = reinterpret_cast<decltype(m.pieces)>(dlsym(handle, "diloco_spm_pieces"));
    m.encode = reinterpret_cast<decltype(m.encode)>(dlsym(handle, "diloco_spm_encode"));
    m.train = reinterpret_cast<decltype(m.train)>(dlsym(handle, "diloco_spm_train"));
    m.decode = reinterpret_cast<decltype(m.decode)>(dlsym(handle, "diloco_spm_decode"));
    if (!m.load || !m.free || !m.pieces || !m.encode || !m.train || !m.decode)
      error = "the SentencePiece module " + path + " lacks its entry points";
  });
  if (!error.empty()) throw DataError(error);
  return m;
}

void append_ids(void* context, const int* ids, std::size_t count) {
  auto* out = static_cast<std::vector<std::uint32_t>*>(context);
  out->insert(out->end(), ids, ids + count);
}

}  // namespace

struct Tokenizer::Impl {
  const Module& m;
  void* model;
  ~Impl() { m.free(model); }
};

Tokenizer::Tokenizer(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw DataError("tokenizer " + path + " does not exist");
  if (::access(path.c_str(), R_OK) != 0) throw DataError("cannot read tokenizer " + path);
  const Module& m = module();
  char err[kErrorLen] = {};
  void* model = m.load(path.c_str(), err, sizeof err);
  if (!model) throw DataError("tokenizer " + path + " is not a SentencePiece model (" + err + ")");
  impl_.reset(new Impl{m, model});
}

Tokenizer::~Tokenizer() = default;

int Tokenizer::vocab_size() const { return impl_->m.pieces(impl_->model); }

void Tokenizer::encode(const std::string& text, std::vector<std::uint32_t>& out) const {
  std::size_t begin = 0;
  char err[kErrorLen] = {};
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin && impl_->m.encode(impl_->model, text.data() + begin, end - begin, append_ids, &out, err, sizeof err) != 0)
      throw DataError(std::string("tokenizer: cannot encode text: ") + err);
    begin = end + 1;
  }
}

std::string Tokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  const std::vector<int> as_int(ids.begin(), ids.end());
  std::string text;
  char err[kErrorLen] = {};
  const auto sink = [](void* context, const char* s, std::size_t len) { static_cast<std::string*>(context)->assign(s, len); };
  if (impl_->m.decode(impl_->model, as_int.data(), as_int.size(), sink, &text, err, sizeof err) != 0)
    throw DataError(std::string("tokenizer: cannot decode ids: ") + err);
  return text;
}

void train_tokenizer(const TokenizerTraining& t) {
  std::string inputs;
  for (const auto& f : t.inputs) inputs += (inputs.empty() ? "" : ",") + f;
  const std::string vocab = std::to_string(t.vocab_size);
  // Passed as options rather than one command line, so paths with spaces pass intact.
  const char* keys[] = {"input", "model_prefix", "vocab_size", "model_type", "byte_fallback", "minloglevel"};
  const char* values[] = {inputs.c_str(), t.model_prefix.c_str(), vocab.c_str(), t.model_type.c_str(), "true", "1"};
  char err[kErrorLen] = {};
  if (module().train(keys, values, 6, err, sizeof err) != 0)
    throw DataError(std::string("training a tokenizer failed: ") + err);
}

}  // namespace diloco::inner

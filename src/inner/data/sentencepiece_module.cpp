// SentencePiece behind a C interface, built as a module that Tokenizer loads
// with dlopen(RTLD_LOCAL | RTLD_DEEPBIND). Debian's libsentencepiece carries
// its own copy of protobuf-lite and exports it; linked into a process that
// also loads libtorch's libprotobuf, the two copies bind to each other's
// symbols and the process crashes before main. Loaded this way, each keeps
// its own.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

void set_error(char* err, std::size_t len, const std::string& message) {
  if (len == 0) return;
  std::strncpy(err, message.c_str(), len - 1);
  err[len - 1] = '\0';
}

}  // namespace

extern "C" {

// A loaded model, or nullptr with the reason in `err`.
void* diloco_spm_load(const char* path, char* err, std::size_t err_len) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  const auto status = processor->Load(path);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    delete processor;
    return nullptr;
  }
  return processor;
}

void diloco_spm_free(void* model) { delete static_cast<sentencepiece::SentencePieceProcessor*>(model); }

int diloco_spm_pieces(void* model) { return static_cast<sentencepiece::SentencePieceProcessor*>(model)->GetPieceSize(); }

// Encodes text[0, len) as one sentence and hands the ids to `sink`. Returns 0,
// or -1 with the reason in `err`.
int diloco_spm_encode(void* model, const char* text, std::size_t len,
                      void (*sink)(void* context, const int* ids, std::size_t count), void* context, char* err,
                      std::size_t err_len) {
  std::vector<int> ids;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(model)->Encode(std::string_view(text, len), &ids);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    return -1;
  }
  sink(context, ids.data(), ids.size());
  return 0;
}

// Decodes ids[0, count) to text and hands it to `sink`. Returns 0, or -1
// with the reason in `err`.
int diloco_spm_decode(void* model, const int* ids, std::size_t count,
                      void (*sink)(void* context, const char* text, std::size_t len), void* context, char* err,
                      std::size_t err_len) {
  std::string text;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(model)->Decode(
      std::vector<int>(ids, ids + count), &text);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    return -1;
  }
  sink(context, text.data(), text.size());
  return 0;
}

// Trains a model from `count` key/value options (SentencePiece's flag names).
// Returns 0, or -1 with the reason in `err`.
int diloco_spm_train(const char* const* keys, const char* const* values, std::size_t count, char* err,
                     std::size_t err_len) {
  std::unordered_map<std::string, std::string> args;
  for (std::size_t i = 0; i < count; ++i) args[keys[i]] = values[i];
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    return -1;
  }
  return 0;
}

}  // extern "C"

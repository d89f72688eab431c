// SentencePiece through the wrapper: a model trained on a small text encodes
// it with ids below its size and decodes them back; a file that is no model
// is refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "inner/data/dataset.h"
#include "inner/data/tokenizer.h"

using namespace diloco::inner;

namespace {

std::string sentences() {
  const char* words[] = {"river", "stone", "light", "garden", "winter", "paper", "north", "music", "silver", "window"};
  std::string out;
  for (int i = 0; i < 4000; ++i) {
    for (int w = 0; w < 8; ++w) out += std::string(words[(i * 7 + w * 3 + i / 11) % 10]) + (w < 7 ? " " : ".\n");
  }
  return out;
}

}  // namespace

TEST(TokenizerTest, TrainsEncodesAndRefusesWhatIsNotAModel) {
  const auto dir = std::filesystem::temp_directory_path() / ("diloco_spm_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string text = sentences();
  std::ofstream((dir / "text.txt").string()) << text;
  TokenizerTraining t;
  t.inputs = {(dir / "text.txt").string()};
  t.model_prefix = (dir / "spm").string();
  t.vocab_size = 290;  // 256 byte pieces, 3 specials, the words and a few more
  train_tokenizer(t);
  const Tokenizer tok((dir / "spm.model").string());
  EXPECT_EQ(tok.vocab_size(), 290);
  std::vector<std::uint32_t> ids;
  tok.encode(text, ids);
  EXPECT_GT(ids.size(), 1000u);
  EXPECT_LT(ids.size(), text.size() / 3);  // whole words became single pieces
  for (const auto id : ids) ASSERT_LT(id, 290u);
  // Decoding gives the text back (one line: encoding drops line ends); an id
  // past the model's pieces is an error, not a guess.
  std::vector<std::uint32_t> line;
  tok.encode("river stone light, caf\xc3\xa9 \xe2\x82\xac 42", line);
  EXPECT_EQ(tok.decode(line), "river stone light, caf\xc3\xa9 \xe2\x82\xac 42");
  EXPECT_THROW(tok.decode({5, 290}), DataError);

  std::ofstream((dir / "fake.model").string()) << "this is not a SentencePiece model";
  try {
    Tokenizer fake((dir / "fake.model").string());
    FAIL() << "a text file loaded as a tokenizer";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "fake.model").string() + " is not a SentencePiece model"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Tokenizer((dir / "missing.model").string()), DataError);
  std::filesystem::remove_all(dir);
}

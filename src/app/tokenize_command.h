// `diloco tokenize`: text files to llm.c token shards with a SentencePiece
// model, trained first when asked.
#pragma once

namespace diloco::app {

// argv[1] is "tokenize". Returns the exit code (2 for bad input).
int run_tokenize(int argc, char** argv);

}  // namespace diloco::app

// `diloco eval` and `diloco sample`: a trained model (a checkpoint or a model
// folder) put to use on data and prompts.
#pragma once

namespace diloco::app {

// diloco eval CKPT|FOLDER --data PATH... [...]; returns the exit code.
int run_eval(int argc, char** argv);
// diloco sample CKPT|FOLDER --prompt TEXT [...]; returns the exit code.
int run_sample(int argc, char** argv);

}  // namespace diloco::app

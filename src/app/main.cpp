// The diloco executable and its subcommands (train, check, tokenize, ...). Maps typed errors to
// exit codes: 2 bad input, 3 communication failure, 1 internal.
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

// --set values may hold commas (TOML arrays); repeat the flag instead.
#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>

#include "app/inspect_command.h"
#include "app/launch_env.h"
#include "app/observe_commands.h"
#include "app/use_commands.h"
#include "app/plan_command.h"
#include "app/probe_command.h"
#include "app/recipe.h"
#include "app/tokenize_command.h"
#include "app/train_command.h"
#include "app/weights.h"
#include "comm/intra_site.h"
#include "inner/inner_loop.h"
#include "inner/data/dataset.h"
#include "inner/models/model.h"

namespace {

constexpr int kExitBadInput = 2;

const char* kUsage =
    "usage: diloco <command> [options]\n"
    "\n"
    "commands:\n"
    "  train RECIPE [--set section.key=value]... [--out DIR] [--resume auto|none|CKPT]\n"
    "                                                          train under MPI (mpirun/srun)\n"
    "  check RECIPE [--set section.key=value]...               validate, print the effective recipe\n"
    "  inspect CHECKPOINT                                      verify a checkpoint, print what it holds\n"
    "  export CHECKPOINT|FOLDER [--format safetensors|hf] --out PATH\n"
    "                                                          a checkpoint's global params as safetensors, or as a\n"
    "                                                          Hugging Face model folder\n"
    "  eval CHECKPOINT|FOLDER --data PATH... [--json]          loss, perplexity and bits per byte on given data\n"
    "  sample CHECKPOINT|FOLDER --prompt TEXT [--tokens N]     text from a model\n"
    "  tokenize INPUT... --out DIR (--tokenizer M | --train-vocab N)\n"
    "                                                          text to llm.c token shards with SentencePiece\n"
    "  probe RECIPE [--set ...] [--out DIR] [--all-ranks]      measure links between sites, or every rank (under mpirun)\n"
    "  plan RECIPE [--set ...] [--links FILE | --cluster FILE] [--step-s S] [--goal G]\n"
    "                                                          sites, H and codecs from measured links (no MPI)\n"
    "  status RUN_DIR                                          the latest round of a running or finished run\n"
    "  report RUN_DIR... --out FILE                            one HTML page comparing runs (charts, summary)\n"
    "  devices                                                 CUDA devices and backends this build can use\n"
    "\n"
    "  diloco --version      print the version\n"
    "  diloco COMMAND --help options of a command\n"
    "\n"
    "exit codes: 0 ok, 1 internal error, 2 bad input (recipe, flag, data), 3 communication failure\n";

int input_error(const std::string& message) {
  if (diloco::app::is_launch_root()) std::cerr << "diloco: error: " << message << std::endl;
  return kExitBadInput;
}

struct CommandLine {
  std::string recipe;
  std::vector<std::string> sets;
  std::string out;
  std::string resume = "none";
  std::string links;
  std::string cluster;
  std::string goal;
  bool all_ranks = false;
  std::optional<double> step_s;
  bool help = false;
  std::string help_text;
};

CommandLine parse_command(const std::string& command, int argc, char** argv, bool with_out, bool with_resume,
                          bool with_plan) {
  const char* what = command == "train"   ? "Train a recipe across sites; launch with mpirun or srun."
                     : command == "probe" ? "Measure latency and bandwidth between site leaders; launch with mpirun."
                     : command == "plan"  ? "Predict round time, communication share and bytes for candidate H and codecs."
                                          : "Validate a recipe and print its effective form (no MPI).";
  cxxopts::Options options("diloco " + command, what);
  options.positional_help("RECIPE");
  options.add_options()("recipe", "TOML recipe", cxxopts::value<std::string>())(
      "set", "override a key: section.key=value (TOML value or bare string); repeatable",
      cxxopts::value<std::vector<std::string>>())("h,help", "show this help");
  if (with_out) options.add_options()("out", "output folder (overrides run.out_dir)", cxxopts::value<std::string>());
  if (with_plan)
    options.add_options()("links", "links.json written by diloco probe (default: the recipe's [links])",
                          cxxopts::value<std::string>())(
        "step-s", "inner-step time in seconds (default: measured here)", cxxopts::value<double>())(
        "cluster", "cluster file written by diloco probe --all-ranks: the sites topology.site_by = \"links\" forms, "
        "their links and step times", cxxopts::value<std::string>())(
        "goal", "utilization=U, bytes or time: print the plan that meets it, as flags and as a recipe fragment",
        cxxopts::value<std::string>());
  if (command == "probe")
    options.add_options()("all-ranks", "measure every pair of ranks and each rank's step time; write OUT/cluster.json");
  if (with_resume)
    options.add_options()("resume", "auto (newest checkpoint that verifies), none, or a checkpoint folder",
                          cxxopts::value<std::string>()->default_value("none"));
  options.parse_positional({"recipe"});
  auto result = options.parse(argc, argv);
  CommandLine cl;
  cl.help_text = options.help();
  if (result.count("help")) {
    cl.help = true;
    return cl;
  }
  if (!result.count("recipe")) throw cxxopts::exceptions::exception("missing RECIPE (a .toml file)");
  if (result.unmatched().size() > 0) throw cxxopts::exceptions::exception("unexpected argument '" + result.unmatched()[0] + "'");
  cl.recipe = result["recipe"].as<std::string>();
  if (result.count("set")) cl.sets = result["set"].as<std::vector<std::string>>();
  if (with_plan && result.count("links")) cl.links = result["links"].as<std::string>();
  if (with_plan && result.count("cluster")) cl.cluster = result["cluster"].as<std::string>();
  if (with_plan && result.count("goal")) cl.goal = result["goal"].as<std::string>();
  if (!cl.links.empty() && !cl.cluster.empty()) throw cxxopts::exceptions::exception("give --links or --cluster, not both");
  if (command == "probe") cl.all_ranks = result.count("all-ranks") > 0;
  if (with_plan && result.count("step-s")) {
    cl.step_s = result["step-s"].as<double>();
    if (!(*cl.step_s > 0.0)) throw cxxopts::exceptions::exception("--step-s must be > 0");
  }
  if (with_resume) {
    cl.resume = result["resume"].as<std::string>();
    if (cl.resume.empty()) throw cxxopts::exceptions::exception("--resume needs auto, none or a checkpoint folder");
  }
  if (with_out && result.count("out")) {
    cl.out = result["out"].as<std::string>();
    if (cl.out.empty()) throw cxxopts::exceptions::exception("--out needs a folder");
  }
  return cl;
}

int inspect_command(int argc, char** argv) {
  if (argc != 3 || std::string(argv[2]).rfind("-", 0) == 0) {
    if (argc == 3 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h")) {
      std::cout << "usage: diloco inspect CHECKPOINT\nVerify a checkpoint folder and print what it holds; exit 0 if it verifies, 2 if not.\n";
      return 0;
    }
    return input_error("usage: diloco inspect CHECKPOINT");
  }
  return diloco::app::run_inspect(argv[2]);
}

int devices_command(int argc, char** argv) {
  if (argc != 2) {
    const bool help = argc == 3 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h");
    if (!help) return input_error("usage: diloco devices");
    std::cout << "usage: diloco devices\nPrint how many CUDA devices libtorch sees and whether NCCL was built in.\n";
    return 0;
  }
  std::cout << "cuda_devices " << diloco::inner::cuda_device_count() << "\n"
            << "nccl " << (diloco::comm::nccl_built() ? "built" : "not built") << "\n";
  return 0;
}

// `diloco check`: the model and the data as train would see them, then the
// effective recipe.
int check_command(const diloco::app::Recipe& recipe) {
  const auto& m = recipe.model;
  long long params = diloco::inner::parameter_count(m);
  if (m.kind == diloco::inner::ModelKind::kTorchScript) {
    // Load it and run the contract check train runs, before a job is queued.
    try {
      torch::manual_seed(0);
      const auto model = diloco::inner::make_model(m);
      params = 0;
      for (const auto& named : model->named_parameters()) params += named.second.numel();
    } catch (const diloco::inner::ModelError& e) {
      return input_error(e.what());
    }
  }
  const char* kinds[] = {"gpt", "llama", "torchscript"};
  std::cerr << "model: " << kinds[static_cast<int>(m.kind)]
            << (recipe.model_source.preset.empty() ? "" : " (preset " + recipe.model_source.preset + ")") << ", "
            << params << " parameters (" << params / 1e6 << "M)\n";
  // What train would refuse about the data, before a job is queued.
  try {
    const auto data = diloco::app::load_dataset(recipe, /*full_scan=*/true);
    std::cerr << "data: " << data.description() << ", " << data.train().size() + data.eval().size() << " tokens ("
              << data.eval().size() << " held out), every id below model.vocab = " << recipe.model.vocab << "\n";
  } catch (const diloco::inner::DataError& e) {
    return input_error(std::string("data: ") + e.what());
  }
  std::cout << diloco::app::to_toml(recipe);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitBadInput;
  }
  const std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::cout << "diloco " << DILOCO_VERSION << "\n";
    return 0;
  }
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "export") return diloco::app::run_export(argc, argv);
  if (command == "tokenize") return diloco::app::run_tokenize(argc, argv);
  if (command == "eval") return diloco::app::run_eval(argc, argv);
  if (command == "sample") return diloco::app::run_sample(argc, argv);
  if (command == "status") return diloco::app::run_status(argc, argv);
  if (command == "report") return diloco::app::run_report(argc, argv);
  if (command == "inspect") return inspect_command(argc, argv);
  if (command == "devices") return devices_command(argc, argv);
  if (command != "train" && command != "check" && command != "probe" && command != "plan") return input_error("unknown command '" + command + "'\n" + kUsage);

  CommandLine cl;
  try {
    cl = parse_command(command, argc - 1, argv + 1, command == "train" || command == "probe", command == "train",
                       command == "plan");
  } catch (const cxxopts::exceptions::exception& e) {
    return input_error(std::string(e.what()) + " (see diloco " + command + " --help)");
  }
  if (cl.help) {
    std::cout << cl.help_text;
    return 0;
  }

  diloco::app::Recipe recipe;
  try {
    std::vector<std::string> sets = cl.sets;
    if (!cl.out.empty()) sets.push_back("run.out_dir=\"" + cl.out + "\"");
    recipe = diloco::app::load_recipe(cl.recipe, sets);
  } catch (const diloco::app::RecipeError& e) {
    return input_error(std::string("recipe: ") + e.what());
  }

  if (command == "check") return check_command(recipe);
  if (command == "probe") return diloco::app::run_probe(recipe, cl.all_ranks, &argc, &argv);
  if (command == "plan") return diloco::app::run_plan(recipe, {cl.links, cl.step_s, cl.cluster, cl.goal});
  return diloco::app::run_train(recipe, cl.resume, &argc, &argv);
}

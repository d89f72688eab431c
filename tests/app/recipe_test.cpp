// Recipe parsing: defaults, overrides (CLI > TOML > defaults), and an error
// naming the key and where it came from for every class of bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/recipe.h"

using diloco::app::parse_recipe;
using diloco::app::Recipe;
using diloco::app::RecipeError;

namespace {

// The message of the RecipeError `text` + `sets` raise, or "" if none.
std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    parse_recipe(text, "test.toml", sets);
  } catch (const RecipeError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(RecipeTest, EmptyRecipeGivesDiLoCoDefaults) {
  Recipe r = parse_recipe("", "empty.toml", {});
  EXPECT_EQ(r.outer.kind, diloco::outer::OuterKind::kNesterov);
  EXPECT_DOUBLE_EQ(r.outer.lr, 0.7);
  EXPECT_DOUBLE_EQ(r.outer.momentum, 0.9);
  EXPECT_EQ(r.compression.codec, "none");
  EXPECT_EQ(r.data.paths, std::vector<std::string>{diloco::app::kDefaultCorpus});
}

TEST(RecipeTest, BundledRecipesParse) {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DILOCO_SOURCE_DIR) + "/recipes")) {
    if (entry.path().extension() != ".toml") continue;
    EXPECT_NO_THROW(diloco::app::load_recipe(entry.path().string(), {})) << entry.path();
  }
  Recipe q = diloco::app::load_recipe(std::string(DILOCO_SOURCE_DIR) + "/recipes/quickstart.toml", {});
  EXPECT_EQ(q.topology.sites, 2);
}

TEST(RecipeTest, SetOverridesTheFileAndAcceptsBareStrings) {
  Recipe r = parse_recipe("[outer]\nrounds = 3\nlr = 0.5\n", "t.toml",
                          {"outer.rounds=6", "outer.optimizer=sgd", "run.name=my run", "data.paths=[\"a\",\"b\"]",
                           "inner.lr=1"});
  EXPECT_EQ(r.outer.rounds, 6);
  EXPECT_DOUBLE_EQ(r.outer.lr, 0.5);
  EXPECT_EQ(r.outer.kind, diloco::outer::OuterKind::kSgd);
  EXPECT_EQ(r.run.name, "my run");
  EXPECT_EQ(r.data.paths, (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(r.inner.lr, 1.0);
}

TEST(RecipeTest, EffectiveRecipeReadsBackToTheSameRecipe) {
  Recipe r = parse_recipe("[sync]\nH = 7\n[inner]\nlr = 3e-4\n", "t.toml", {"data.sharding=contiguous"});
  const std::string text = diloco::app::to_toml(r);
  Recipe back = parse_recipe(text, "effective.toml", {});
  EXPECT_EQ(diloco::app::to_toml(back), text);
  EXPECT_EQ(back.sync.H, 7);
  EXPECT_DOUBLE_EQ(back.inner.lr, 3e-4);
  EXPECT_EQ(back.data.sharding, diloco::inner::Sharding::kContiguous);
}

TEST(RecipeErrorTest, UnknownKeyNamesKeyFileAndLine) {
  const auto e = error_of("[outer]\nrounds = 2\nlearning_rate = 0.1\n");
  EXPECT_NE(e.find("test.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("outer.learning_rate"), std::string::npos) << e;
}

TEST(RecipeErrorTest, UnknownSection) {
  const auto e = error_of("[optimiser]\nlr = 1\n");
  EXPECT_NE(e.find("unknown section [optimiser]"), std::string::npos) << e;
}

TEST(RecipeErrorTest, WrongType) {
  auto e = error_of("[sync]\nH = \"fifty\"\n");
  EXPECT_NE(e.find("sync.H must be an integer"), std::string::npos) << e;
  EXPECT_NE(e.find("test.toml:2"), std::string::npos) << e;
  e = error_of("[model]\nd_model = 64.5\n");
  EXPECT_NE(e.find("model.d_model must be an integer"), std::string::npos) << e;
  e = error_of("[data]\npaths = \"/tmp\"\n");
  EXPECT_NE(e.find("data.paths must be an array"), std::string::npos) << e;
}

TEST(RecipeErrorTest, OutOfRange) {
  auto e = error_of("[outer]\nlr = -0.1\n");
  EXPECT_NE(e.find("outer.lr must be > 0"), std::string::npos) << e;
  e = error_of("[outer]\nmomentum = 1.0\n");
  EXPECT_NE(e.find("outer.momentum must be in [0, 1)"), std::string::npos) << e;
  e = error_of("[topology]\nsites = 0\n");
  EXPECT_NE(e.find("topology.sites must be between 1"), std::string::npos) << e;
}

TEST(RecipeErrorTest, BadChoice) {
  auto e = error_of("[outer]\noptimizer = \"adam\"\n");
  EXPECT_NE(e.find("outer.optimizer must be one of \"nesterov\", \"sgd\""), std::string::npos) << e;
  e = error_of("[compression]\ncodec = \"zstd\"\n");
  EXPECT_NE(e.find("compression.codec must be one of"), std::string::npos) << e;
}

TEST(RecipeErrorTest, SyntaxErrorNamesFileAndLine) {
  const auto e = error_of("[run]\nseed = = 3\n");
  EXPECT_NE(e.find("test.toml:2"), std::string::npos) << e;
}

TEST(RecipeErrorTest, CrossKeyCheckNamesTheKey) {
  const auto e = error_of("[model]\nd_model = 100\nn_heads = 3\n");
  EXPECT_NE(e.find("model.n_heads must divide model.d_model"), std::string::npos) << e;
  EXPECT_NE(e.find("test.toml:3"), std::string::npos) << e;
}

TEST(RecipeErrorTest, BadSetFlagsNameTheFlag) {
  auto e = error_of("", {"outer.nope=1"});
  EXPECT_NE(e.find("--set outer.nope"), std::string::npos) << e;
  e = error_of("", {"sync.H=abc"});
  EXPECT_NE(e.find("--set sync.H: sync.H must be an integer"), std::string::npos) << e;
  e = error_of("", {"rounds=3"});
  EXPECT_NE(e.find("must be section.key"), std::string::npos) << e;
  e = error_of("", {"outer.rounds"});
  EXPECT_NE(e.find("expected section.key=value"), std::string::npos) << e;
}

TEST(RecipeErrorTest, MissingFile) {
  try {
    diloco::app::load_recipe("/nonexistent/recipe.toml", {});
    FAIL() << "no error";
  } catch (const RecipeError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/recipe.toml: cannot open"), std::string::npos);
  }
}

TEST(RecipeDeviceTest, DeviceKeysParseAndRoundTrip) {
  const auto r = diloco::app::parse_recipe(
      "[run]\ndevice = \"cuda\"\n[comm]\nintra_site = \"nccl\"\n[inner]\nprecision = \"bf16\"\n[outer]\nstate_device = \"cpu\"\n",
      "test.toml", {});
  EXPECT_EQ(r.devices.device, diloco::inner::DeviceSetting::kCuda);
  EXPECT_EQ(r.devices.intra_site, diloco::comm::IntraSiteSetting::kNccl);
  EXPECT_EQ(r.devices.precision, diloco::inner::Precision::kBf16);
  EXPECT_FALSE(r.devices.outer_state_on_device);
  const auto again = diloco::app::parse_recipe(diloco::app::to_toml(r), "effective.toml", {});
  EXPECT_EQ(again.devices.device, r.devices.device);
  EXPECT_EQ(again.devices.intra_site, r.devices.intra_site);
  EXPECT_EQ(again.devices.precision, r.devices.precision);
}

TEST(RecipeDeviceTest, ImpossibleDeviceCombinationsNameTheKey) {
  auto e = error_of("[run]\ndevice = \"tpu\"\n");
  EXPECT_NE(e.find("run.device must be one of \"auto\", \"cpu\", \"cuda\""), std::string::npos) << e;
  e = error_of("[run]\ndevice = \"cuda\"\n[outer]\nstate_device = \"same\"\n");
  EXPECT_NE(e.find("outer.state_device = \"same\" is not possible with run.device = \"cuda\""), std::string::npos) << e;
  e = error_of("[run]\ndevice = \"cpu\"\n[comm]\nintra_site = \"nccl\"\n");
  EXPECT_NE(e.find("comm.intra_site = \"nccl\" needs run.device"), std::string::npos) << e;
  e = error_of("", {"inner.precision=fp16"});
  EXPECT_NE(e.find("inner.precision must be one of \"fp32\", \"bf16\""), std::string::npos) << e;
}

TEST(RecipeTest, ModelPresetThenExplicitKeys) {
  Recipe r = parse_recipe("[model]\npreset = \"diloco-150m\"\nseq_len = 256\n", "p.toml", {});
  EXPECT_EQ(r.model.kind, diloco::inner::ModelKind::kLlama);
  EXPECT_EQ(r.model.vocab, 32000);
  EXPECT_EQ(r.model.d_model, 896);
  EXPECT_EQ(r.model.n_layers, 12);
  EXPECT_EQ(r.model.n_heads, 16);
  EXPECT_EQ(r.model.seq_len, 256);
  EXPECT_NEAR(static_cast<double>(diloco::inner::parameter_count(r.model)), 150e6, 2e6);
  // Explicit keys override the preset, from the file and from --set alike.
  Recipe o = parse_recipe("[model]\npreset = \"diloco-150m\"\nn_layers = 3\n", "p.toml", {"model.n_kv_heads=4"});
  EXPECT_EQ(o.model.n_layers, 3);
  EXPECT_EQ(o.model.n_kv_heads, 4);
  EXPECT_EQ(o.model.d_model, 896);
  // The effective recipe reads back to the same model.
  Recipe back = parse_recipe(diloco::app::to_toml(o), "back.toml", {});
  EXPECT_EQ(back.model.n_layers, 3);
  EXPECT_EQ(back.model.n_kv_heads, 4);
  EXPECT_EQ(back.model_source.preset, "diloco-150m");
  EXPECT_NEAR(static_cast<double>(diloco::inner::parameter_count(parse_recipe("[model]\npreset = \"diloco-60m\"", "p", {}).model)), 60e6, 3e6);
  EXPECT_NEAR(static_cast<double>(diloco::inner::parameter_count(parse_recipe("[model]\npreset = \"diloco-400m\"", "p", {}).model)), 400e6, 12e6);
}

TEST(RecipeTest, ModelKeyErrorsNameTheKey) {
  EXPECT_NE(error_of("[model]\npreset = \"gpt-9\"").find("test.toml:2:10: model.preset must be one of"), std::string::npos)
      << error_of("[model]\npreset = \"gpt-9\"");
  EXPECT_NE(error_of("[model]\nkind = \"llama\"\nn_kv_heads = 3").find("model.n_kv_heads (3) must divide model.n_heads (4)"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nn_kv_heads = 2").find("model.n_kv_heads does not apply to model.kind = \"gpt\""),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nkind = \"llama\"\nvocab = 100").find("test.toml:3:9: model.vocab (100) must be at least 256"),
            std::string::npos) << error_of("[model]\nkind = \"llama\"\nvocab = 100");
  EXPECT_NE(error_of("[model]\nkind = \"bert\"").find("model.kind must be one of \"gpt\", \"llama\", \"torchscript\""),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nkind = \"torchscript\"").find("model.kind = \"torchscript\" needs model.path"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\npath = \"m.pt\"").find("model.path does not apply to model.kind = \"gpt\""),
            std::string::npos);
}

TEST(RecipeTest, DataFormatKeysParseAndReadBack) {
  Recipe r = parse_recipe("[data]\nformat = \"tokens\"\npaths = [\"shards\"]\neval_paths = [\"val.bin\"]\n"
                          "token_dtype = \"uint32\"\n[model]\nvocab = 128256\n",
                          "t.toml", {});
  EXPECT_EQ(r.data.format, diloco::inner::DataFormat::kTokens);
  EXPECT_EQ(r.data.token_dtype, diloco::inner::TokenDtype::kUint32);
  EXPECT_EQ(r.data.eval_paths, std::vector<std::string>{"val.bin"});
  EXPECT_EQ(r.model.vocab, 128256);
  Recipe back = parse_recipe(diloco::app::to_toml(r), "effective.toml", {});
  EXPECT_EQ(back.data.format, r.data.format);
  EXPECT_EQ(back.data.token_dtype, r.data.token_dtype);
  EXPECT_EQ(back.data.eval_paths, r.data.eval_paths);
  Recipe text = parse_recipe("[data]\nformat = \"text\"\ntokenizer = \"m.model\"\n[model]\nvocab = 2000\n", "t.toml", {});
  EXPECT_EQ(text.data.tokenizer, "m.model");
  // Bytes need the byte vocabulary; token formats are checked against their ids instead.
  EXPECT_NE(error_of("[model]\nvocab = 100\n").find("must be at least 256: the data are bytes"), std::string::npos);
  EXPECT_EQ(error_of("[data]\nformat = \"tokens\"\n[model]\nvocab = 100\n"), "");
  EXPECT_NE(error_of("[data]\ntokenizer = \"m.model\"\n").find("data.tokenizer applies to data.format = \"text\" only"),
            std::string::npos);
}

TEST(RecipeTest, DataParallelModeRefusesKeysItHasNoUseFor) {
  const std::string dp = "[sync]\nmode = \"data-parallel\"\nH = 4\n";
  Recipe r = parse_recipe(dp, "t.toml", {});
  EXPECT_EQ(r.sync.mode, diloco::outer::SyncMode::kDataParallel);
  // Its effective recipe (defaults listed) reads back.
  EXPECT_EQ(diloco::app::to_toml(parse_recipe(diloco::app::to_toml(r), "effective.toml", {})), diloco::app::to_toml(r));
  for (const std::string set : {"sync.overlap=delayed", "sync.schedule=overhead", "outer.lr=0.5", "outer.optimizer=sgd",
                                "outer.momentum=0.5", "sync.fragments=2", "outer.max_update_norm_ratio=0"}) {
    const auto e = error_of(dp, {set});
    const auto key = set.substr(0, set.find('='));
    EXPECT_NE(e.find(key + " does not apply to sync.mode = \"data-parallel\""), std::string::npos) << set << ": " << e;
    EXPECT_NE(e.find("--set " + key), std::string::npos) << e;
  }
  const auto e = error_of("[sync]\nmode = \"data-parallel\"\n[outer]\nlr = 0.5\n");
  EXPECT_NE(e.find("test.toml:4"), std::string::npos) << e;
  EXPECT_NE(error_of("[sync]\nmode = \"ddp\"\n").find("sync.mode"), std::string::npos);
}

TEST(RecipeTest, RotaryAndNormKeysParseReadBackAndApplyToLlamaOnly) {
  const Recipe r = parse_recipe(
      "[model]\nkind = \"llama\"\nrope_theta = 500000\nnorm_eps = 1e-6\nmax_positions = 512\n"
      "rope_scaling = { rope_type = \"llama3\", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, "
      "original_max_position_embeddings = 128 }\n",
      "t.toml", {});
  EXPECT_EQ(r.model.rope_theta, 500000.0);
  EXPECT_EQ(r.model.norm_eps, 1e-6);
  EXPECT_EQ(r.model.max_positions, 512);
  EXPECT_EQ(r.model.rope_scaling.type, "llama3");
  EXPECT_EQ(r.model.rope_scaling.original_max_positions, 128);
  const Recipe back = parse_recipe(diloco::app::to_toml(r), "effective.toml", {});
  EXPECT_EQ(back.model.rope_theta, r.model.rope_theta);
  EXPECT_EQ(back.model.norm_eps, r.model.norm_eps);
  EXPECT_EQ(back.model.rope_scaling, r.model.rope_scaling);
  EXPECT_EQ(parse_recipe(diloco::app::to_toml(parse_recipe("", "e.toml", {})), "d.toml", {}).model.rope_scaling.type, "");
  EXPECT_NE(error_of("[model]\nrope_theta = 500000.0\n").find("test.toml:2:14: model.rope_theta does not apply to "
                                                               "model.kind = \"gpt\""),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nkind = \"llama\"\nnorm_eps = 0\n").find("model.norm_eps must be in (0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nkind = \"llama\"\nrope_scaling = { rope_type = \"yarn\", factor = 4.0 }\n")
                .find("model.rope_scaling rope_type must be \"llama3\""),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nkind = \"llama\"\nrope_scaling = { rope_type = \"llama3\", factor = 8.0, "
                     "low_freq_factor = 4.0, high_freq_factor = 1.0 }\n")
                .find("test.toml:3:16: model.rope_scaling: llama3 needs"),
            std::string::npos);
}

// model.init_from naming a Hugging Face folder: the architecture is the
// folder's, and explicit keys must agree with it.
TEST(RecipeTest, ModelFolderGivesTheArchitecture) {
  const auto dir = std::filesystem::temp_directory_path() / ("diloco_recipe_folder_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 300,
        "rope_theta": 500000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "max_position_embeddings": 256})";
  }
  const std::string from = "model.init_from=\"" + dir.string() + "\"";
  const Recipe r = parse_recipe("[model]\nseq_len = 32\n", "t.toml", {from});
  EXPECT_EQ(r.model.kind, diloco::inner::ModelKind::kLlama);
  EXPECT_EQ(r.model.d_model, 64);
  EXPECT_EQ(r.model.n_kv_heads, 2);
  EXPECT_EQ(r.model.ffn_hidden, 96);
  EXPECT_EQ(r.model.vocab, 300);
  EXPECT_EQ(r.model.rope_theta, 500000.0);
  EXPECT_EQ(r.model.norm_eps, 1e-6);
  EXPECT_FALSE(r.model.tie_embeddings);
  EXPECT_EQ(r.model.max_positions, 256);
  EXPECT_EQ(r.model.seq_len, 32);
  // Keys that agree are fine; one that does not is named with both values.
  EXPECT_NO_THROW(parse_recipe("[model]\nkind = \"llama\"\nd_model = 64\nrope_theta = 5e5\n", "t.toml", {from}));
  EXPECT_NE(error_of("[model]\nd_model = 128\n", {from}).find("test.toml:2:11: model.d_model = 128, but " +
                                                              dir.string() + "/config.json has hidden_size = 64"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nkind = \"llama\"\n", {from, "model.rope_theta=10000"})
                .find("--set model.rope_theta: model.rope_theta = 10000, but"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nseq_len = 512\n", {from}).find("exceeds"), std::string::npos);
  EXPECT_NE(error_of("[model]\npreset = \"llama-tiny\"\n", {from}).find("keep one"), std::string::npos);
  {
    std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 300,
        "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})";
  }
  EXPECT_NE(error_of("", {from}).find("rope_scaling.rope_type \"dynamic\" is not implemented"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(RecipeTest, CodecAndOptimizerKeysApplyWhereTheyAreRead) {
  const std::string ctk = "[compression]\ncodec = \"chunk-topk\"\nblock = 4096\nbits = 4\n";
  Recipe r = parse_recipe(ctk, "t.toml", {"inner.optimizer=muon", "inner.muon_momentum=0.9"});
  EXPECT_EQ(r.compression.bits, 4);
  EXPECT_EQ(r.inner.kind, diloco::inner::InnerOptimizerKind::kMuon);
  EXPECT_DOUBLE_EQ(r.inner.muon_momentum, 0.9);
  EXPECT_EQ(diloco::app::to_toml(parse_recipe(diloco::app::to_toml(r), "effective.toml", {})), diloco::app::to_toml(r));
  // Out of range, or set where nothing reads it: refused, naming the key and where it was set.
  auto e = error_of(ctk, {"compression.bits=3"});
  EXPECT_NE(e.find("compression.bits must be 2, 4 or 8"), std::string::npos) << e;
  e = error_of("[compression]\ncodec = \"int8\"\nbits = 4\n");
  EXPECT_NE(e.find("compression.bits applies only to compression.codec = \"chunk-topk\""), std::string::npos) << e;
  EXPECT_NE(e.find("test.toml:3"), std::string::npos) << e;
  e = error_of(ctk, {"compression.block=65537"});
  EXPECT_NE(e.find("compression.block is chunk-topk's chunk and must be at most 65536"), std::string::npos) << e;
  EXPECT_NE(e.find("--set compression.block"), std::string::npos) << e;
  e = error_of("", {"inner.muon_momentum=0.9"});
  EXPECT_NE(e.find("inner.muon_momentum applies only to inner.optimizer = \"muon\""), std::string::npos) << e;
  EXPECT_NE(error_of("", {"inner.optimizer=sgd"}).find("inner.optimizer"), std::string::npos);
}

TEST(RecipeTest, SitesLaunchedApartTakeEverySyncModeButNotSiteBy) {
  const std::string rdv = "[topology]\njoin = \"rendezvous\"\nsites = 3\n[rendezvous]\nsite = 1\n";
  EXPECT_EQ(parse_recipe(rdv, "t.toml", {"sync.overlap=delayed"}).sync.overlap, diloco::outer::OverlapMode::kDelayed);
  EXPECT_EQ(parse_recipe(rdv, "t.toml", {"sync.overlap=streaming", "sync.fragments=2", "sync.overlap_steps=1"})
                .sync.overlap,
            diloco::outer::OverlapMode::kStreaming);
  EXPECT_EQ(parse_recipe(rdv, "t.toml", {"sync.mode=data-parallel"}).sync.mode, diloco::outer::SyncMode::kDataParallel);
  const auto e = error_of(rdv, {"topology.site_by=node"});
  EXPECT_NE(e.find("topology.site_by"), std::string::npos) << e;
  EXPECT_NE(e.find("is not supported with topology.join = \"rendezvous\""), std::string::npos) << e;
}

TEST(RecipeTest, FaultKeysNeedSitesLaunchedApartAndAKnownPhase) {
  const std::string rdv = "[topology]\njoin = \"rendezvous\"\nsites = 3\n[rendezvous]\nsite = 1\n";
  Recipe r = parse_recipe(rdv, "t.toml",
                          {"debug.fault_site=1", "debug.fault_signal=stop", "debug.fault_phase=join-ready",
                           "debug.fault_round=6"});
  EXPECT_EQ(r.debug.fault_site, 1);
  EXPECT_EQ(r.debug.fault_signal, "stop");
  EXPECT_EQ(r.debug.fault_phase, "join-ready");
  EXPECT_EQ(r.debug.fault_round, 6);
  auto e = error_of(rdv, {"debug.fault_site=1"});
  EXPECT_NE(e.find("debug.fault_site needs topology.join = \"rendezvous\" and debug.fault_phase"), std::string::npos)
      << e;
  e = error_of("", {"debug.fault_site=0", "debug.fault_phase=inner"});
  EXPECT_NE(e.find("debug.fault_site needs"), std::string::npos) << e;
  e = error_of(rdv, {"debug.fault_phase=join-nowhere"});
  EXPECT_NE(e.find("debug.fault_phase must be one of"), std::string::npos) << e;
  e = error_of(rdv, {"debug.fault_signal=term"});
  EXPECT_NE(e.find("debug.fault_signal must be one of \"kill\", \"stop\", \"exit\", \"timeout\""), std::string::npos)
      << e;
  // A wait that runs out is raised where an exchange completed, nowhere else.
  EXPECT_EQ(parse_recipe(rdv, "t.toml", {"debug.fault_site=1", "debug.fault_signal=timeout", "debug.fault_phase=exchanged"})
                .debug.fault_phase,
            "exchanged");
  e = error_of(rdv, {"debug.fault_site=1", "debug.fault_signal=timeout", "debug.fault_phase=inner"});
  EXPECT_NE(e.find("debug.fault_signal = \"timeout\" needs debug.fault_phase = \"exchanged\""), std::string::npos) << e;
}

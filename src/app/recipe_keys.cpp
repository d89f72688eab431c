// The recipe's key table: every section's keys with their types, ranges and
// fields, and the keys that need more than a plain value.
#include <algorithm>

#include "app/model_presets.h"
#include "app/recipe_key.h"
#include "diloco/compression/codec.h"

namespace diloco::app::recipe_keys {
namespace {

Key error_feedback_key() {
  Key k{"compression", "error_feedback", {}, {}};
  k.read = [](const toml::node& node, Recipe& r) -> std::string {
    if (!node.is_boolean()) return "must be true or false (got " + describe(node) + ")";
    r.compression.error_feedback = *node.value<bool>();
    return {};
  };
  k.write = [](const Recipe& r) { return std::string(r.compression.error_feedback.value_or(false) ? "true" : "false"); };
  return k;
}

Key site_numbers_key(std::string name, std::vector<double> LinksSection::*field) {
  Key k{"links", name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    const toml::array* arr = node.as_array();
    if (!arr) return "must be an array with one number per site (got " + describe(node) + ")";
    std::vector<double> values;
    for (const auto& item : *arr) {
      if (!item.is_number()) return "must hold numbers (holds " + describe(item) + ")";
      const double v = *item.value<double>();
      if (!std::isfinite(v) || v < 0.0) return "must hold numbers >= 0";
      values.push_back(v);
    }
    r.links.*field = values;
    return {};
  };
  k.write = [=](const Recipe& r) {
    std::string out = "[";
    for (std::size_t i = 0; i < (r.links.*field).size(); ++i) out += (i ? ", " : "") + float_text((r.links.*field)[i]);
    return out + "]";
  };
  return k;
}

// links.changes = [{ round = 20, site = 1, bandwidth_mbps = 5.0 }, ...]; an
// omitted latency or bandwidth keeps the site's configured value.
Key link_changes_key() {
  Key k{"links", "changes", {}, {}};
  k.read = [](const toml::node& node, Recipe& r) -> std::string {
    const toml::array* arr = node.as_array();
    if (!arr) return "must be an array of tables (got " + describe(node) + ")";
    r.links.changes.clear();
    for (const auto& item : *arr) {
      const toml::table* t = item.as_table();
      if (!t) return "must hold tables like { round = 20, site = 1, bandwidth_mbps = 5.0 }";
      comm::LinkChange c;
      c.link.latency_ms = -1.0;
      c.link.bandwidth_mbps = -1.0;
      bool has_round = false, has_site = false;
      for (auto&& [key, value] : *t) {
        const std::string name(key.str());
        if ((name == "round" || name == "site") && !value.is_integer()) return "entry " + name + " must be an integer";
        if ((name == "latency_ms" || name == "bandwidth_mbps") && (!value.is_number() || *value.value<double>() < 0.0))
          return "entry " + name + " must be a number >= 0";
        if (name == "round") c.round = static_cast<int>(*value.value<std::int64_t>()), has_round = true;
        else if (name == "site") c.site = static_cast<int>(*value.value<std::int64_t>()), has_site = true;
        else if (name == "latency_ms") c.link.latency_ms = *value.value<double>();
        else if (name == "bandwidth_mbps") c.link.bandwidth_mbps = *value.value<double>();
        else return "entry has unknown key '" + name + "' (known: round, site, latency_ms, bandwidth_mbps)";
      }
      if (!has_round || !has_site || c.round < 1) return "each entry needs round >= 1 and site";
      r.links.changes.push_back(c);
    }
    return {};
  };
  k.write = [](const Recipe& r) {
    std::string out = "[";
    for (std::size_t i = 0; i < r.links.changes.size(); ++i) {
      const auto& c = r.links.changes[i];
      out += (i ? ", " : "") + std::string("{ round = ") + std::to_string(c.round) + ", site = " + std::to_string(c.site);
      if (c.link.latency_ms >= 0.0) out += ", latency_ms = " + float_text(c.link.latency_ms);
      if (c.link.bandwidth_mbps >= 0.0) out += ", bandwidth_mbps = " + float_text(c.link.bandwidth_mbps);
      out += " }";
    }
    return out + "]";
  };
  return k;
}

// data.paths (at least one entry) or data.eval_paths (may be empty: no held-out files).
Key paths_key(const char* name, std::vector<std::string> inner::DataConfig::*field, bool empty_ok) {
  Key k{"data", name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    const toml::array* arr = node.as_array();
    if (!arr) return "must be an array of strings (got " + describe(node) + ")";
    if (arr->empty() && !empty_ok) return "must name at least one file or folder";
    std::vector<std::string> paths;
    for (const auto& item : *arr) {
      if (!item.is_string()) return "must be an array of strings (holds " + describe(item) + ")";
      paths.push_back(*item.value<std::string>());
    }
    r.data.*field = paths;
    return {};
  };
  k.write = [=](const Recipe& r) {
    const auto& paths = r.data.*field;
    std::string out = "[";
    for (std::size_t i = 0; i < paths.size(); ++i) out += (i ? ", " : "") + string_text(paths[i]);
    return out + "]";
  };
  return k;
}

// model.rope_scaling = { rope_type = "llama3", factor = 8.0, low_freq_factor = 1.0,
// high_freq_factor = 4.0, original_max_position_embeddings = 8192 }, or {} for none
// (Hugging Face's field names).
Key rope_scaling_key() {
  Key k{"model", "rope_scaling", {}, {}};
  k.read = [](const toml::node& node, Recipe& r) -> std::string {
    const toml::table* t = node.as_table();
    if (!t) return "must be a table like { rope_type = \"llama3\", factor = 8.0, ... } or {} (got " + describe(node) + ")";
    inner::RopeScaling s;
    if (t->empty()) {
      r.model.rope_scaling = s;
      return {};
    }
    const auto type = (*t)["rope_type"].value<std::string>();
    if (!type || *type != "llama3") return "rope_type must be \"llama3\" (the only scaling implemented)";
    s.type = *type;
    for (auto&& [key, value] : *t) {
      const std::string name(key.str());
      if (name == "rope_type") continue;
      if (!value.is_number()) return "entry " + name + " must be a number";
      const double v = *value.value<double>();
      if (name == "factor") s.factor = v;
      else if (name == "low_freq_factor") s.low_freq_factor = v;
      else if (name == "high_freq_factor") s.high_freq_factor = v;
      else if (name == "original_max_position_embeddings" && value.is_integer() && v >= 1 && v <= (1 << 24))
        s.original_max_positions = static_cast<int>(v);
      else
        return "entry '" + name + "' is unknown or out of range (known: rope_type, factor, low_freq_factor, "
               "high_freq_factor, original_max_position_embeddings: an integer)";
    }
    r.model.rope_scaling = s;
    return {};
  };
  k.write = [](const Recipe& r) {
    const auto& s = r.model.rope_scaling;
    if (s.type.empty()) return std::string("{}");
    return "{ rope_type = " + string_text(s.type) + ", factor = " + float_text(s.factor) +
           ", low_freq_factor = " + float_text(s.low_freq_factor) + ", high_freq_factor = " +
           float_text(s.high_freq_factor) + ", original_max_position_embeddings = " +
           std::to_string(s.original_max_positions) + " }";
  };
  return k;
}

bool positive(double v) { return v > 0.0; }
bool non_negative(double v) { return v >= 0.0; }
bool unit_open(double v) { return v >= 0.0 && v < 1.0; }

using R = Recipe;

// run: the run's name, seed, output folder, threads and device.
void run_keys(std::vector<Key>& k) {
  k.push_back(string_key("run", "name", &R::run, &RunConfig::name));
  k.push_back(integer_key("run", "seed", &R::run, &RunConfig::seed, 0, kBig));
  k.push_back(string_key("run", "out_dir", &R::run, &RunConfig::out_dir));
  k.push_back(integer_key("run", "threads", &R::run, &RunConfig::threads, 1, 256));
  k.push_back(enum_key("run", "device", &R::devices, &DeviceSection::device,
                       std::vector<std::pair<std::string, inner::DeviceSetting>>{
                           {"auto", inner::DeviceSetting::kAuto},
                           {"cpu", inner::DeviceSetting::kCpu},
                           {"cuda", inner::DeviceSetting::kCuda}}));
}

// comm: what carries the gradient all-reduce inside a site.
void comm_keys(std::vector<Key>& k) {
  k.push_back(enum_key("comm", "intra_site", &R::devices, &DeviceSection::intra_site,
                       std::vector<std::pair<std::string, comm::IntraSiteSetting>>{
                           {"auto", comm::IntraSiteSetting::kAuto},
                           {"mpi", comm::IntraSiteSetting::kMpi},
                           {"nccl", comm::IntraSiteSetting::kNccl}}));
}

// model: a preset, a folder or file to start from, and the architecture.
void model_keys(std::vector<Key>& k) {
  std::vector<std::string> preset_names{""};
  for (const auto& p : model_presets()) preset_names.push_back(p.name);
  k.push_back(string_key("model", "preset", &R::model_source, &ModelSourceSection::preset, preset_names, true));
  k.push_back(string_key("model", "init_from", &R::model_source, &ModelSourceSection::init_from, {}, true));
  k.push_back(enum_key("model", "kind", &R::model, &inner::ModelConfig::kind,
                       std::vector<std::pair<std::string, inner::ModelKind>>{
                           {"gpt", inner::ModelKind::kGpt},
                           {"llama", inner::ModelKind::kLlama},
                           {"torchscript", inner::ModelKind::kTorchScript}}));
  k.push_back(string_key("model", "path", &R::model, &inner::ModelConfig::path, {}, true));
  k.push_back(integer_key("model", "vocab", &R::model, &inner::ModelConfig::vocab, 2, 1 << 24));
  k.push_back(integer_key("model", "d_model", &R::model, &inner::ModelConfig::d_model, 8, 16384));
  k.push_back(integer_key("model", "n_layers", &R::model, &inner::ModelConfig::n_layers, 1, 256));
  k.push_back(integer_key("model", "n_heads", &R::model, &inner::ModelConfig::n_heads, 1, 256));
  k.push_back(integer_key("model", "seq_len", &R::model, &inner::ModelConfig::seq_len, 2, 65536));
  k.push_back(integer_key("model", "n_kv_heads", &R::model, &inner::ModelConfig::n_kv_heads, 0, 256));
  k.push_back(integer_key("model", "ffn_hidden", &R::model, &inner::ModelConfig::ffn_hidden, 0, 1 << 20));
  k.push_back(bool_key("model", "tie_embeddings", &R::model, &inner::ModelConfig::tie_embeddings));
  k.push_back(number_key("model", "rope_theta", &R::model, &inner::ModelConfig::rope_theta,
                         [](double v) { return v > 1.0; }, "> 1"));
  k.push_back(number_key("model", "norm_eps", &R::model, &inner::ModelConfig::norm_eps,
                         [](double v) { return v > 0.0 && v < 1.0; }, "in (0, 1)"));
  k.push_back(rope_scaling_key());
  k.push_back(integer_key("model", "max_positions", &R::model, &inner::ModelConfig::max_positions, 0, 1 << 24));
}

// data: the corpus, its format and split, the batch.
void data_keys(std::vector<Key>& k) {
  k.push_back(enum_key("data", "format", &R::data, &inner::DataConfig::format,
                       std::vector<std::pair<std::string, inner::DataFormat>>{{"bytes", inner::DataFormat::kBytes},
                                                                              {"tokens", inner::DataFormat::kTokens},
                                                                              {"text", inner::DataFormat::kText}}));
  k.push_back(paths_key("paths", &inner::DataConfig::paths, false));
  k.push_back(paths_key("eval_paths", &inner::DataConfig::eval_paths, true));
  k.push_back(enum_key("data", "token_dtype", &R::data, &inner::DataConfig::token_dtype,
                       std::vector<std::pair<std::string, inner::TokenDtype>>{{"auto", inner::TokenDtype::kAuto},
                                                                              {"uint16", inner::TokenDtype::kUint16},
                                                                              {"uint32", inner::TokenDtype::kUint32}}));
  k.push_back(string_key("data", "tokenizer", &R::data, &inner::DataConfig::tokenizer, {}, true));
  k.push_back(number_key("data", "eval_fraction", &R::data, &inner::DataConfig::eval_fraction,
                         [](double v) { return v > 0.0 && v <= 0.5; }, "in (0, 0.5]"));
  k.push_back(enum_key("data", "sharding", &R::data, &inner::DataConfig::sharding,
                       std::vector<std::pair<std::string, inner::Sharding>>{
                           {"iid", inner::Sharding::kIid}, {"contiguous", inner::Sharding::kContiguous}}));
  k.push_back(integer_key("data", "batch_size", &R::data, &inner::DataConfig::batch_size, 1, 1 << 20));
}

// inner: the inner optimizer's steps.
void inner_keys(std::vector<Key>& k) {
  k.push_back(enum_key("inner", "optimizer", &R::inner, &inner::InnerOptimConfig::kind,
                       std::vector<std::pair<std::string, inner::InnerOptimizerKind>>{
                           {"adamw", inner::InnerOptimizerKind::kAdamW}, {"muon", inner::InnerOptimizerKind::kMuon}}));
  k.push_back(number_key("inner", "muon_momentum", &R::inner, &inner::InnerOptimConfig::muon_momentum, unit_open,
                         "in [0, 1)"));
  k.push_back(number_key("inner", "lr", &R::inner, &inner::InnerOptimConfig::lr, positive, "> 0"));
  k.push_back(integer_key("inner", "warmup_steps", &R::inner, &inner::InnerOptimConfig::warmup_steps, 0, kBig));
  k.push_back(number_key("inner", "min_lr_ratio", &R::inner, &inner::InnerOptimConfig::min_lr_ratio,
                         [](double v) { return v >= 0.0 && v <= 1.0; }, "in [0, 1]"));
  k.push_back(number_key("inner", "weight_decay", &R::inner, &inner::InnerOptimConfig::weight_decay, non_negative, ">= 0"));
  k.push_back(number_key("inner", "beta1", &R::inner, &inner::InnerOptimConfig::beta1, unit_open, "in [0, 1)"));
  k.push_back(number_key("inner", "beta2", &R::inner, &inner::InnerOptimConfig::beta2, unit_open, "in [0, 1)"));
  k.push_back(enum_key("inner", "precision", &R::devices, &DeviceSection::precision,
                       std::vector<std::pair<std::string, inner::Precision>>{{"fp32", inner::Precision::kFp32},
                                                                             {"bf16", inner::Precision::kBf16}}));
  k.push_back(number_key("inner", "grad_clip", &R::inner, &inner::InnerOptimConfig::grad_clip, non_negative,
                         ">= 0 (0 turns clipping off)"));
}

// outer: the outer optimizer and the outlier check.
void outer_keys(std::vector<Key>& k) {
  k.push_back(integer_key("outer", "rounds", &R::outer, &outer::OuterConfig::rounds, 1, 1 << 30));
  k.push_back(enum_key("outer", "optimizer", &R::outer, &outer::OuterConfig::kind,
                       std::vector<std::pair<std::string, outer::OuterKind>>{
                           {"nesterov", outer::OuterKind::kNesterov}, {"sgd", outer::OuterKind::kSgd}}));
  k.push_back(number_key("outer", "lr", &R::outer, &outer::OuterConfig::lr, positive, "> 0"));
  k.push_back(enum_key("outer", "state_device", &R::devices, &DeviceSection::outer_state_on_device,
                       std::vector<std::pair<std::string, bool>>{{"cpu", false}, {"same", true}}));
  k.push_back(number_key("outer", "momentum", &R::outer, &outer::OuterConfig::momentum, unit_open, "in [0, 1)"));
  k.push_back(top_number_key("outer", "max_update_norm_ratio", &R::max_update_norm_ratio, non_negative,
                             ">= 0 (0 turns the outlier check off)"));
}

// sync: when sites exchange, how H is planned, overlap, timeouts.
void sync_keys(std::vector<Key>& k) {
  k.push_back(enum_key("sync", "mode", &R::sync, &outer::SyncConfig::mode,
                       std::vector<std::pair<std::string, outer::SyncMode>>{
                           {"diloco", outer::SyncMode::kDiLoCo},
                           {"data-parallel", outer::SyncMode::kDataParallel}}));
  k.push_back(integer_key("sync", "H", &R::sync, &outer::SyncConfig::H, 1, 1 << 30));
  k.push_back(enum_key("sync", "schedule", &R::sync, &outer::SyncConfig::schedule_mode,
                       std::vector<std::pair<std::string, outer::ScheduleMode>>{
                           {"fixed", outer::ScheduleMode::kFixed},
                           {"overhead", outer::ScheduleMode::kOverhead},
                           {"time-budget", outer::ScheduleMode::kTimeBudget}}));
  k.push_back(integer_key("sync", "h_min", &R::sync, &outer::SyncConfig::h_min, 1, 1 << 30));
  k.push_back(integer_key("sync", "h_max", &R::sync, &outer::SyncConfig::h_max, 1, 1 << 30));
  k.push_back(number_key("sync", "target_comm_share", &R::sync, &outer::SyncConfig::target_comm_share,
                         [](double v) { return v > 0.0 && v < 1.0; }, "in (0, 1)"));
  k.push_back(number_key("sync", "hysteresis", &R::sync, &outer::SyncConfig::hysteresis,
                         [](double v) { return v >= 0.0 && v < 10.0; }, "in [0, 10)"));
  k.push_back(enum_key("sync", "overlap", &R::sync, &outer::SyncConfig::overlap,
                       std::vector<std::pair<std::string, outer::OverlapMode>>{
                           {"none", outer::OverlapMode::kNone},
                           {"delayed", outer::OverlapMode::kDelayed},
                           {"streaming", outer::OverlapMode::kStreaming}}));
  k.push_back(integer_key("sync", "fragments", &R::sync, &outer::SyncConfig::fragments, 1, 4096));
  k.push_back(integer_key("sync", "overlap_steps", &R::sync, &outer::SyncConfig::overlap_steps, 0, 1 << 30));
  k.push_back(number_key("sync", "mix_alpha", &R::sync, &outer::SyncConfig::mix_alpha,
                         [](double v) { return v >= 0.0 && v < 1.0; }, "in [0, 1)"));
  k.push_back(integer_key("sync", "reprobe_every", &R::sync, &outer::SyncConfig::reprobe_every, 0, 1 << 30));
  k.push_back(integer_key("sync", "check_every", &R::sync, &outer::SyncConfig::check_every, 0, 1 << 30));
  k.push_back(number_key("sync", "timeout_s", &R::timeouts, &TimeoutSection::timeout_s, positive, "> 0"));
  k.push_back(number_key("sync", "startup_timeout_s", &R::timeouts, &TimeoutSection::startup_timeout_s, positive, "> 0"));
}

// compression: the codec and the exchange algorithm.
void compression_keys(std::vector<Key>& k) {
  k.push_back(string_key("compression", "codec", &R::compression, &CompressionConfig::codec,
                         compression::codec_names()));
  k.push_back(integer_key("compression", "block", &R::compression, &CompressionConfig::block, 1, 1 << 24));
  k.push_back(bool_key("compression", "stochastic_rounding", &R::compression, &CompressionConfig::stochastic_rounding));
  k.push_back(number_key("compression", "topk_ratio", &R::compression, &CompressionConfig::topk_ratio,
                         [](double v) { return v > 0.0 && v <= 1.0; }, "in (0, 1]"));
  k.push_back(integer_key("compression", "bits", &R::compression, &CompressionConfig::bits, 2, 8));
  k.push_back(error_feedback_key());
  k.push_back(number_key("compression", "error_feedback_decay", &R::compression,
                         &CompressionConfig::error_feedback_decay, [](double v) { return v >= 0.0 && v <= 1.0; },
                         "in [0, 1]"));
  k.push_back(string_key("compression", "exchange", &R::compression, &CompressionConfig::exchange,
                         {"auto", "all_gather", "ring"}));
}

// topology: how ranks form sites and how sites join.
void topology_keys(std::vector<Key>& k) {
  k.push_back(integer_key("topology", "sites", &R::topology, &TopologyConfig::sites, 1, 1 << 20));
  // Left out of the effective recipe when the nodes decide it.
  k.back().write = [](const Recipe& r) {
    return r.topology.site_by != "block" && !r.topology.sites_given ? std::string() : std::to_string(r.topology.sites);
  };
  k.push_back(string_key("topology", "site_by", &R::topology, &TopologyConfig::site_by, {"block", "node", "links"}));
  k.push_back(integer_key("topology", "nodes_per_site", &R::topology, &TopologyConfig::nodes_per_site, 1, 1 << 20));
  k.push_back(number_key("topology", "link_gap", &R::topology, &TopologyConfig::link_gap,
                         [](double v) { return v >= 1.5 && v <= 1000.0; }, "in [1.5, 1000]"));
  k.push_back(string_key("topology", "cluster", &R::topology, &TopologyConfig::cluster, {}, true));
  k.push_back(string_key("topology", "join", &R::topology, &TopologyConfig::join, {"world", "rendezvous"}));
}

// rendezvous: sites launched apart.
void rendezvous_keys(std::vector<Key>& k) {
  k.push_back(string_key("rendezvous", "run_id", &R::rendezvous, &RendezvousSection::run_id, {}, true));
  k.push_back(integer_key("rendezvous", "site", &R::rendezvous, &RendezvousSection::site, -1, 1 << 20));
  k.push_back(string_key("rendezvous", "site_name", &R::rendezvous, &RendezvousSection::site_name, {}, true));
  k.push_back(integer_key("rendezvous", "min_sites", &R::rendezvous, &RendezvousSection::min_sites, 0, 1 << 20));
  k.push_back(number_key("rendezvous", "join_timeout_s", &R::rendezvous, &RendezvousSection::join_timeout_s,
                         positive, "> 0"));
  k.push_back(number_key("rendezvous", "ping_s", &R::rendezvous, &RendezvousSection::ping_s,
                         [](double v) { return v >= 0.1 && v <= 60.0; }, "in [0.1, 60]"));
}

// security: the key between sites.
void security_keys(std::vector<Key>& k) {
  k.push_back(string_key("security", "key_file", &R::security, &SecuritySection::key_file, {}, true));
}

// checkpoint: where, how often, how many kept.
void checkpoint_keys(std::vector<Key>& k) {
  k.push_back(string_key("checkpoint", "dir", &R::checkpoint, &CheckpointSection::dir, {}, true));
  k.push_back(integer_key("checkpoint", "every", &R::checkpoint, &CheckpointSection::every, 0, 1 << 30));
  k.push_back(integer_key("checkpoint", "keep", &R::checkpoint, &CheckpointSection::keep, 1, 1000));
}

// links: emulated links between sites.
void links_keys(std::vector<Key>& k) {
  k.push_back(site_numbers_key("latency_ms", &LinksSection::latency_ms));
  k.push_back(site_numbers_key("bandwidth_mbps", &LinksSection::bandwidth_mbps));
  k.push_back(link_changes_key());
}

// metrics: evaluation.
void metrics_keys(std::vector<Key>& k) {
  k.push_back(integer_key("metrics", "eval_every", &R::metrics, &outer::EvalConfig::every, 1, 1 << 30));
  k.push_back(integer_key("metrics", "eval_windows", &R::metrics, &outer::EvalConfig::windows, 1, 1 << 24));
  k.push_back(bool_key("metrics", "tensorboard", &R::observe, &ObserveSection::tensorboard));
  k.push_back(number_key("metrics", "peak_tflops", &R::observe, &ObserveSection::peak_tflops,
                         [](double v) { return v >= 0.0 && v <= 1e6; }, "in [0, 1e6]"));
}

}  // namespace

const std::vector<Key>& keys() {
  static const std::vector<Key> table = [] {
    std::vector<Key> k;
    // In this order: sections are written, and listed in errors, as they first appear.
    for (auto section : {run_keys, comm_keys, model_keys, data_keys, inner_keys, outer_keys, sync_keys,
                         compression_keys, topology_keys, rendezvous_keys, security_keys, debug_keys, checkpoint_keys,
                         links_keys, metrics_keys})
      section(k);
    return k;
  }();
  return table;
}

}  // namespace diloco::app::recipe_keys

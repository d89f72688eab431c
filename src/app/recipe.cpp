// Recipe keys are declared once in a table (name, type, range, field); parsing,
// validation, --set overrides and the effective-recipe dump all walk it.
#include "app/recipe.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "app/model_presets.h"
#include "diloco/compression/codec.h"
#include "inner/model_config.h"

namespace diloco::app {
namespace {

std::string where(const toml::node& node, const std::set<std::string>& overridden, const std::string& dotted,
                  const std::string& fallback) {
  if (overridden.count(dotted)) return "--set " + dotted;
  const auto& src = node.source();
  std::ostringstream out;
  out << (src.path ? *src.path : fallback);
  if (src.begin.line > 0) out << ":" << src.begin.line << ":" << src.begin.column;
  return out.str();
}

std::string describe(const toml::node& node) {
  std::ostringstream out;
  out << node.type() << " ";
  node.visit([&](auto&& v) { out << v; });
  return out.str();
}

struct Key {
  std::string section;
  std::string name;
  // Reads `node` into the recipe; returns an empty string or what is wrong.
  std::function<std::string(const toml::node&, Recipe&)> read;
  // The value as TOML text, for the effective recipe.
  std::function<std::string(const Recipe&)> write;
};

// Shortest text that reads back to the same double, always a TOML float.
std::string float_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string out(buf, end);
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

std::string string_text(const std::string& v) {
  std::ostringstream out;
  out << toml::value<std::string>(v);
  return out.str();
}

template <class S>
using SectionOf = S Recipe::*;

template <class S, class T>
Key integer_key(std::string section, std::string name, SectionOf<S> sec, T S::*field, std::int64_t lo,
                std::int64_t hi) {
  Key k{section, name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    if (!node.is_integer()) return "must be an integer (got " + describe(node) + ")";
    const std::int64_t v = *node.value<std::int64_t>();
    if (v < lo || v > hi)
      return "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " + std::to_string(v) + ")";
    (r.*sec).*field = static_cast<T>(v);
    return {};
  };
  k.write = [=](const Recipe& r) { return std::to_string(static_cast<std::int64_t>((r.*sec).*field)); };
  return k;
}

// Floats accept integers too (lr = 1 is fine). `ok` states the range.
template <class S>
Key number_key(std::string section, std::string name, SectionOf<S> sec, double S::*field,
               std::function<bool(double)> ok, std::string range) {
  Key k{section, name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    if (!node.is_number()) return "must be a number (got " + describe(node) + ")";
    const double v = *node.value<double>();
    if (!std::isfinite(v) || !ok(v)) return "must be " + range + " (got " + describe(node).substr(describe(node).find(' ') + 1) + ")";
    (r.*sec).*field = v;
    return {};
  };
  k.write = [=](const Recipe& r) { return float_text((r.*sec).*field); };
  return k;
}

// A number that lives directly in Recipe rather than in a section struct.
Key top_number_key(std::string section, std::string name, double Recipe::*field, std::function<bool(double)> ok,
                   std::string range) {
  Key k{section, name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    if (!node.is_number()) return "must be a number (got " + describe(node) + ")";
    const double v = *node.value<double>();
    if (!std::isfinite(v) || !ok(v)) return "must be " + range;
    r.*field = v;
    return {};
  };
  k.write = [=](const Recipe& r) { return float_text(r.*field); };
  return k;
}

template <class S>
Key string_key(std::string section, std::string name, SectionOf<S> sec, std::string S::*field,
               std::vector<std::string> allowed = {}, bool empty_ok = false) {
  Key k{section, name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    if (!node.is_string()) return "must be a string (got " + describe(node) + ")";
    std::string v = *node.value<std::string>();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
      return "must be one of " + list + " (got \"" + v + "\")";
    }
    if (allowed.empty() && v.empty() && !empty_ok) return "must not be empty";
    (r.*sec).*field = v;
    return {};
  };
  k.write = [=](const Recipe& r) { return string_text((r.*sec).*field); };
  return k;
}

template <class S, class E>
Key enum_key(std::string section, std::string name, SectionOf<S> sec, E S::*field,
             std::vector<std::pair<std::string, E>> names) {
  Key k{section, name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    std::string list;
    for (const auto& [n, e] : names) list += (list.empty() ? "" : ", ") + ("\"" + n + "\"");
    if (!node.is_string()) return "must be one of " + list + " (got " + describe(node) + ")";
    const std::string v = *node.value<std::string>();
    for (const auto& [n, e] : names)
      if (n == v) {
        (r.*sec).*field = e;
        return {};
      }
    return "must be one of " + list + " (got \"" + v + "\")";
  };
  k.write = [=](const Recipe& r) {
    for (const auto& [n, e] : names)
      if (e == (r.*sec).*field) return string_text(n);
    return std::string("\"\"");
  };
  return k;
}

template <class S>
Key bool_key(std::string section, std::string name, SectionOf<S> sec, bool S::*field) {
  Key k{section, name, {}, {}};
  k.read = [=](const toml::node& node, Recipe& r) -> std::string {
    if (!node.is_boolean()) return "must be true or false (got " + describe(node) + ")";
    (r.*sec).*field = *node.value<bool>();
    return {};
  };
  k.write = [=](const Recipe& r) { return std::string((r.*sec).*field ? "true" : "false"); };
  return k;
}

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

Key paths_key() {
  Key k{"data", "paths", {}, {}};
  k.read = [](const toml::node& node, Recipe& r) -> std::string {
    const toml::array* arr = node.as_array();
    if (!arr) return "must be an array of strings (got " + describe(node) + ")";
    if (arr->empty()) return "must name at least one file or folder";
    std::vector<std::string> paths;
    for (const auto& item : *arr) {
      if (!item.is_string()) return "must be an array of strings (holds " + describe(item) + ")";
      paths.push_back(*item.value<std::string>());
    }
    r.data.paths = paths;
    return {};
  };
  k.write = [](const Recipe& r) {
    std::string out = "[";
    for (std::size_t i = 0; i < r.data.paths.size(); ++i) out += (i ? ", " : "") + string_text(r.data.paths[i]);
    return out + "]";
  };
  return k;
}

constexpr std::int64_t kBig = std::int64_t{1} << 40;

const std::vector<Key>& keys() {
  static const std::vector<Key> table = [] {
    const auto positive = [](double v) { return v > 0.0; };
    const auto non_negative = [](double v) { return v >= 0.0; };
    const auto unit_open = [](double v) { return v >= 0.0 && v < 1.0; };
    std::vector<Key> k;
    using R = Recipe;
    k.push_back(string_key("run", "name", &R::run, &RunConfig::name));
    k.push_back(integer_key("run", "seed", &R::run, &RunConfig::seed, 0, kBig));
    k.push_back(string_key("run", "out_dir", &R::run, &RunConfig::out_dir));
    k.push_back(integer_key("run", "threads", &R::run, &RunConfig::threads, 1, 256));
    k.push_back(enum_key("run", "device", &R::devices, &DeviceSection::device,
                         std::vector<std::pair<std::string, inner::DeviceSetting>>{
                             {"auto", inner::DeviceSetting::kAuto},
                             {"cpu", inner::DeviceSetting::kCpu},
                             {"cuda", inner::DeviceSetting::kCuda}}));
    k.push_back(enum_key("comm", "intra_site", &R::devices, &DeviceSection::intra_site,
                         std::vector<std::pair<std::string, comm::IntraSiteSetting>>{
                             {"auto", comm::IntraSiteSetting::kAuto},
                             {"mpi", comm::IntraSiteSetting::kMpi},
                             {"nccl", comm::IntraSiteSetting::kNccl}}));

    std::vector<std::string> preset_names{""};
    for (const auto& p : model_presets()) preset_names.push_back(p.name);
    k.push_back(string_key("model", "preset", &R::model_source, &ModelSourceSection::preset, preset_names, true));
    k.push_back(string_key("model", "init_from", &R::model_source, &ModelSourceSection::init_from, {}, true));
    k.push_back(enum_key("model", "kind", &R::model, &inner::ModelConfig::kind,
                         std::vector<std::pair<std::string, inner::ModelKind>>{{"gpt", inner::ModelKind::kGpt},
                                                                               {"llama", inner::ModelKind::kLlama}}));
    k.push_back(integer_key("model", "vocab", &R::model, &inner::ModelConfig::vocab, 2, 1 << 24));
    k.push_back(integer_key("model", "d_model", &R::model, &inner::ModelConfig::d_model, 8, 16384));
    k.push_back(integer_key("model", "n_layers", &R::model, &inner::ModelConfig::n_layers, 1, 256));
    k.push_back(integer_key("model", "n_heads", &R::model, &inner::ModelConfig::n_heads, 1, 256));
    k.push_back(integer_key("model", "seq_len", &R::model, &inner::ModelConfig::seq_len, 2, 65536));
    k.push_back(integer_key("model", "n_kv_heads", &R::model, &inner::ModelConfig::n_kv_heads, 0, 256));
    k.push_back(integer_key("model", "ffn_hidden", &R::model, &inner::ModelConfig::ffn_hidden, 0, 1 << 20));
    k.push_back(bool_key("model", "tie_embeddings", &R::model, &inner::ModelConfig::tie_embeddings));

    k.push_back(paths_key());
    k.push_back(number_key("data", "eval_fraction", &R::data, &inner::DataConfig::eval_fraction,
                           [](double v) { return v > 0.0 && v <= 0.5; }, "in (0, 0.5]"));
    k.push_back(enum_key("data", "sharding", &R::data, &inner::DataConfig::sharding,
                         std::vector<std::pair<std::string, inner::Sharding>>{
                             {"iid", inner::Sharding::kIid}, {"contiguous", inner::Sharding::kContiguous}}));
    k.push_back(integer_key("data", "batch_size", &R::data, &inner::DataConfig::batch_size, 1, 1 << 20));

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
    k.push_back(number_key("sync", "timeout_s", &R::timeouts, &TimeoutSection::timeout_s, positive, "> 0"));
    k.push_back(number_key("sync", "startup_timeout_s", &R::timeouts, &TimeoutSection::startup_timeout_s, positive, "> 0"));

    k.push_back(string_key("compression", "codec", &R::compression, &CompressionConfig::codec,
                           compression::codec_names()));
    k.push_back(integer_key("compression", "block", &R::compression, &CompressionConfig::block, 1, 1 << 24));
    k.push_back(bool_key("compression", "stochastic_rounding", &R::compression, &CompressionConfig::stochastic_rounding));
    k.push_back(number_key("compression", "topk_ratio", &R::compression, &CompressionConfig::topk_ratio,
                           [](double v) { return v > 0.0 && v <= 1.0; }, "in (0, 1]"));
    k.push_back(error_feedback_key());
    k.push_back(number_key("compression", "error_feedback_decay", &R::compression,
                           &CompressionConfig::error_feedback_decay, [](double v) { return v >= 0.0 && v <= 1.0; },
                           "in [0, 1]"));
    k.push_back(string_key("compression", "exchange", &R::compression, &CompressionConfig::exchange,
                           {"auto", "all_gather", "ring"}));

    k.push_back(integer_key("topology", "sites", &R::topology, &TopologyConfig::sites, 1, 1 << 20));
    // Left out of the effective recipe when the nodes decide it.
    k.back().write = [](const Recipe& r) {
      return r.topology.site_by == "node" && !r.topology.sites_given ? std::string() : std::to_string(r.topology.sites);
    };
    k.push_back(string_key("topology", "site_by", &R::topology, &TopologyConfig::site_by, {"block", "node"}));
    k.push_back(integer_key("topology", "nodes_per_site", &R::topology, &TopologyConfig::nodes_per_site, 1, 1 << 20));

    k.push_back(string_key("checkpoint", "dir", &R::checkpoint, &CheckpointSection::dir, {}, true));
    k.push_back(integer_key("checkpoint", "every", &R::checkpoint, &CheckpointSection::every, 0, 1 << 30));
    k.push_back(site_numbers_key("latency_ms", &LinksSection::latency_ms));
    k.push_back(site_numbers_key("bandwidth_mbps", &LinksSection::bandwidth_mbps));
    k.push_back(link_changes_key());
    k.push_back(integer_key("checkpoint", "keep", &R::checkpoint, &CheckpointSection::keep, 1, 1000));
    k.push_back(integer_key("debug", "nan_site", &R::debug, &DebugSection::nan_site, -1, 1 << 20));
    k.push_back(integer_key("debug", "nan_round", &R::debug, &DebugSection::nan_round, 0, 1 << 30));
    k.push_back(integer_key("debug", "exit_rank", &R::debug, &DebugSection::exit_rank, -1, 1 << 20));
    k.push_back(integer_key("debug", "exit_step", &R::debug, &DebugSection::exit_step, 0, kBig));
    k.push_back(integer_key("debug", "freeze_rank", &R::debug, &DebugSection::freeze_rank, -1, 1 << 20));
    k.push_back(integer_key("debug", "freeze_step", &R::debug, &DebugSection::freeze_step, 0, kBig));
    k.push_back(integer_key("debug", "slow_site", &R::debug, &DebugSection::slow_site, -1, 1 << 20));
    k.push_back(number_key("debug", "slow_factor", &R::debug, &DebugSection::slow_factor,
                           [](double v) { return v >= 1.0 && v <= 1000.0; }, "in [1, 1000]"));
    k.push_back(integer_key("metrics", "eval_every", &R::metrics, &outer::EvalConfig::every, 1, 1 << 30));
    k.push_back(integer_key("metrics", "eval_windows", &R::metrics, &outer::EvalConfig::windows, 1, 1 << 24));
    return k;
  }();
  return table;
}

std::vector<std::string> section_names() {
  std::vector<std::string> out;
  for (const auto& k : keys())
    if (std::find(out.begin(), out.end(), k.section) == out.end()) out.push_back(k.section);
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void apply_override(toml::table& root, const std::string& flag, std::set<std::string>& overridden) {
  const auto eq = flag.find('=');
  if (eq == std::string::npos)
    throw RecipeError("--set " + flag + ": expected section.key=value");
  const std::string dotted = flag.substr(0, eq);
  const std::string text = flag.substr(eq + 1);
  const auto dot = dotted.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == dotted.size() || dotted.find('.', dot + 1) != std::string::npos)
    throw RecipeError("--set " + flag + ": key '" + dotted + "' must be section.key");
  const std::string section = dotted.substr(0, dot);
  const std::string key = dotted.substr(dot + 1);

  // A TOML value if it parses as one (42, 0.5, true, ["a"]); otherwise a bare string.
  toml::table parsed;
  try {
    parsed = toml::parse("value = " + text, "--set " + dotted);
  } catch (const toml::parse_error&) {
    parsed = toml::table{};
    parsed.insert("value", text);
  }
  if (!root.contains(section)) root.insert(section, toml::table{});
  toml::table* tbl = root[section].as_table();
  if (!tbl) throw RecipeError("--set " + flag + ": [" + section + "] is not a table in the recipe");
  parsed["value"].node()->visit([&](auto&& v) { tbl->insert_or_assign(key, v); });
  overridden.insert(dotted);
}

Recipe validate(const toml::table& root, const std::string& source, const std::set<std::string>& overridden) {
  Recipe r;
  r.data.paths = {kDefaultCorpus};
  // A preset sets the model's sizes first; explicit model.* keys then override.
  if (const toml::node* preset = root.at_path("model.preset").node(); preset && preset->is_string()) {
    if (const auto* found = find_model_preset(*preset->value<std::string>())) {
      const int seq_len = r.model.seq_len;
      r.model = found->config;
      r.model.seq_len = seq_len;
    }
  }
  const auto sections = section_names();
  for (auto&& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    if (std::find(sections.begin(), sections.end(), section) == sections.end())
      throw RecipeError(where(section_node, overridden, section, source) + ": unknown section [" + section +
                        "] (known: " + join(sections) + ")");
    const toml::table* tbl = section_node.as_table();
    if (!tbl) throw RecipeError(where(section_node, overridden, section, source) + ": '" + section + "' must be a table");
    for (auto&& [name_key, node] : *tbl) {
      const std::string name(name_key.str());
      const std::string dotted = section + "." + name;
      const auto& all = keys();
      auto it = std::find_if(all.begin(), all.end(), [&](const Key& k) { return k.section == section && k.name == name; });
      if (it == all.end()) {
        std::vector<std::string> known;
        for (const auto& k : all)
          if (k.section == section) known.push_back(k.name);
        throw RecipeError(where(node, overridden, dotted, source) + ": unknown key '" + dotted + "' (known in [" +
                          section + "]: " + join(known) + ")");
      }
      if (std::string problem = it->read(node, r); !problem.empty())
        throw RecipeError(where(node, overridden, dotted, source) + ": " + dotted + " " + problem);
    }
  }
  // Checks that involve more than one key name the key a user would change.
  auto locate = [&](const std::string& section, const std::string& name) {
    const toml::node* n = root.at_path(section + "." + name).node();
    return n ? where(*n, overridden, section + "." + name, source) : source;
  };
  r.topology.sites_given = root.at_path("topology.sites").node() != nullptr;
  // Error feedback defaults on for lossy codecs (SparseLoCo, DeMo), off for fp32.
  if (!r.compression.error_feedback) r.compression.error_feedback = r.compression.codec != "none";
  // With site_by = "node" and no topology.sites the launch decides the count;
  // the per-site keys are then checked when the sites are cut.
  const bool sites_known = r.topology.site_by == "block" || r.topology.sites_given;
  if (r.links.enabled() && sites_known) {
    const auto sites = static_cast<std::size_t>(r.topology.sites);
    for (const char* name : {"latency_ms", "bandwidth_mbps"}) {
      const auto& v = std::string(name) == "latency_ms" ? r.links.latency_ms : r.links.bandwidth_mbps;
      if (!v.empty() && v.size() != sites)
        throw RecipeError(locate("links", name) + ": links." + name + " has " + std::to_string(v.size()) +
                          " entries; topology.sites is " + std::to_string(sites));
    }
    for (const auto& c : r.links.changes)
      if (c.site < 0 || static_cast<std::size_t>(c.site) >= sites)
        throw RecipeError(locate("links", "changes") + ": links.changes names site " + std::to_string(c.site) +
                          "; sites are 0.." + std::to_string(sites - 1));
  } else if (!r.links.enabled() && !r.links.changes.empty()) {
    throw RecipeError(locate("links", "changes") + ": links.changes needs links.latency_ms or links.bandwidth_mbps");
  }
  if (sites_known && r.debug.slow_site >= r.topology.sites)
    throw RecipeError(locate("debug", "slow_site") + ": debug.slow_site names site " +
                      std::to_string(r.debug.slow_site) + "; sites are 0.." + std::to_string(r.topology.sites - 1));
  if (r.sync.overlap == outer::OverlapMode::kStreaming) {
    if (r.sync.schedule_mode != outer::ScheduleMode::kFixed)
      throw RecipeError(locate("sync", "schedule") +
                        ": sync.schedule must be \"fixed\" with sync.overlap = \"streaming\" (its exchanges hide "
                        "behind sync.overlap_steps, not behind H)");
    if (r.sync.overlap_steps > r.sync.H / r.sync.fragments)
      throw RecipeError(locate("sync", "overlap_steps") + ": sync.overlap_steps (" +
                        std::to_string(r.sync.overlap_steps) + ") must be at most sync.H / sync.fragments (" +
                        std::to_string(r.sync.H / r.sync.fragments) + "), so one fragment is in flight at a time");
  }
  if (r.devices.outer_state_on_device && r.devices.device == inner::DeviceSetting::kCuda)
    throw RecipeError(locate("outer", "state_device") +
                      ": outer.state_device = \"same\" is not possible with run.device = \"cuda\": the outer "
                      "optimizer works on host memory (use \"cpu\", which keeps the outer state off the GPU)");
  if (r.devices.intra_site == comm::IntraSiteSetting::kNccl && r.devices.device == inner::DeviceSetting::kCpu)
    throw RecipeError(locate("comm", "intra_site") +
                      ": comm.intra_site = \"nccl\" needs run.device = \"cuda\" or \"auto\" (NCCL reduces GPU memory)");
  if (r.sync.h_min > r.sync.h_max)
    throw RecipeError(locate("sync", "h_min") + ": sync.h_min (" + std::to_string(r.sync.h_min) +
                      ") is above sync.h_max (" + std::to_string(r.sync.h_max) + ")");
  if (r.model.d_model % r.model.n_heads != 0)
    throw RecipeError(locate("model", "n_heads") + ": model.n_heads must divide model.d_model (" +
                      std::to_string(r.model.n_heads) + " does not divide " + std::to_string(r.model.d_model) + ")");
  if (r.model.kind == inner::ModelKind::kGpt) {
    // The byte GPT has one shape of each: other values are refused, not ignored.
    const std::pair<const char*, bool> llama_only[] = {{"n_kv_heads", r.model.n_kv_heads != 0},
                                                       {"ffn_hidden", r.model.ffn_hidden != 0},
                                                       {"tie_embeddings", !r.model.tie_embeddings}};
    for (const auto& [name, set] : llama_only)
      if (set)
        throw RecipeError(locate("model", name) + ": model." + name + " applies to model.kind = \"llama\" only");
  } else {
    try {
      inner::check_llama_config(r.model);
    } catch (const std::invalid_argument& e) {
      throw RecipeError(locate("model", r.model.n_kv_heads > 0 ? "n_kv_heads" : "n_heads") + ": " + e.what());
    }
  }
  // The data are bytes: every byte must be a token the model knows.
  if (r.model.vocab < 256)
    throw RecipeError(locate("model", "vocab") + ": model.vocab (" + std::to_string(r.model.vocab) +
                      ") must be at least 256: the data are bytes");
  return r;
}

Recipe parse_table(toml::table root, const std::string& source, const std::vector<std::string>& overrides) {
  std::set<std::string> overridden;
  for (const auto& flag : overrides) apply_override(root, flag, overridden);
  return validate(root, source, overridden);
}

}  // namespace

Recipe parse_recipe(const std::string& toml_text, const std::string& source,
                    const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    throw RecipeError(msg.str());
  }
  return parse_table(std::move(root), source, overrides);
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  // A folder opens as a stream on Linux and reads as empty: a default recipe.
  if (std::filesystem::is_directory(path, ec)) throw RecipeError(path + ": is a folder, not a recipe file");
  std::ifstream in(path);
  if (!in) throw RecipeError(path + ": cannot open recipe");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw RecipeError(path + ": cannot read recipe");
  return parse_recipe(text.str(), path, overrides);
}

std::vector<comm::SiteLink> LinksSection::sites() const {
  const std::size_t n = std::max(latency_ms.size(), bandwidth_mbps.size());
  std::vector<comm::SiteLink> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i < latency_ms.size()) out[i].latency_ms = latency_ms[i];
    if (i < bandwidth_mbps.size()) out[i].bandwidth_mbps = bandwidth_mbps[i];
  }
  return out;
}

std::shared_ptr<comm::LinkEmulator> LinksSection::emulator() const {
  if (!enabled()) return nullptr;
  const auto base = sites();
  auto changes_resolved = changes;
  for (auto& c : changes_resolved) {
    if (c.link.latency_ms < 0.0) c.link.latency_ms = base[static_cast<std::size_t>(c.site)].latency_ms;
    if (c.link.bandwidth_mbps < 0.0) c.link.bandwidth_mbps = base[static_cast<std::size_t>(c.site)].bandwidth_mbps;
  }
  auto emulator = std::make_shared<comm::LinkEmulator>(base, changes_resolved);
  emulator->set_round(1);
  return emulator;
}

std::string to_toml(const Recipe& recipe) {
  std::ostringstream out;
  for (const auto& section : section_names()) {
    out << (out.tellp() > 0 ? "\n" : "") << "[" << section << "]\n";
    for (const auto& k : keys())
      if (k.section == section)
        if (const std::string value = k.write(recipe); !value.empty()) out << k.name << " = " << value << "\n";
  }
  return out.str();
}

}  // namespace diloco::app

// Recipe parsing: --set overrides, one pass over the key table
// (app/recipe_keys.cpp), the checks that involve several keys, and the
// effective recipe as TOML.
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
#include "app/recipe_key.h"
#include "inner/model_config.h"

namespace diloco::app {
namespace {

// Where a key is set ("FILE:LINE" or the --set flag), for errors that name it.
using Locate = std::function<std::string(const std::string& section, const std::string& name)>;

// Throws for the first of `keys` ("section.name", set to something that
// does not apply) that is set, naming it and saying why (`reason`).
void refuse_set(std::initializer_list<std::pair<const char*, bool>> keys, const Locate& locate,
                const std::string& reason) {
  for (const auto& [dotted, set] : keys) {
    if (!set) continue;
    const std::string key(dotted);
    const auto dot = key.find('.');
    throw RecipeError(locate(key.substr(0, dot), key.substr(dot + 1)) + ": " + key + reason);
  }
}

// topology.join = "rendezvous": each launch is one site of topology.sites,
// trained by blocking DiLoCo (what a lost or late site can be fitted into).
void check_rendezvous(Recipe& r, const Locate& locate) {
  const bool rendezvous = r.topology.join == "rendezvous";
  auto& z = r.rendezvous;
  if (!r.security.key_file.empty() && r.compression.exchange == "ring")
    throw RecipeError(locate("compression", "exchange") + ": compression.exchange = \"ring\" cannot leave one "
                      "forged message out (every hop carries all sites' sums); with security.key_file use "
                      "\"auto\" or \"all_gather\"");
  if (r.debug.forge_site >= 0 && r.security.key_file.empty())
    throw RecipeError(locate("debug", "forge_site") + ": debug.forge_site needs security.key_file");
  if (r.debug.fault_site >= 0 && (!rendezvous || r.debug.fault_phase.empty()))
    throw RecipeError(locate("debug", "fault_site") + ": debug.fault_site needs topology.join = \"rendezvous\" "
                      "and debug.fault_phase");
  if (r.debug.fault_signal == "timeout" && r.debug.fault_phase != "exchanged" && r.debug.fault_site >= 0)
    throw RecipeError(locate("debug", "fault_signal") + ": debug.fault_signal = \"timeout\" needs debug.fault_phase = "
                      "\"exchanged\" (a wait that runs out once an exchange completed)");
  if (!rendezvous) {
    if (z.site >= 0) throw RecipeError(locate("rendezvous", "site") + ": rendezvous.site needs topology.join = \"rendezvous\"");
    return;
  }
  const int sites = r.topology.sites;
  if (z.site < 0 || z.site >= sites)
    throw RecipeError(locate("rendezvous", "site") + ": rendezvous.site must name this launch's site, 0.." +
                      std::to_string(sites - 1) + " (topology.sites = " + std::to_string(sites) +
                      "; e.g. --set rendezvous.site=1)");
  if (z.min_sites == 0) z.min_sites = sites / 2 + 1;
  if (z.min_sites > sites)
    throw RecipeError(locate("rendezvous", "min_sites") + ": rendezvous.min_sites (" + std::to_string(z.min_sites) +
                      ") is above topology.sites (" + std::to_string(sites) + ")");
  if (z.run_id.empty()) z.run_id = r.run.name;
  if (z.site_name.empty()) z.site_name = "site-" + std::to_string(z.site);
  refuse_set({{"topology.site_by", r.topology.site_by != "block"}}, locate,
             " is not supported with topology.join = \"rendezvous\" (each launch is one site by definition)");
}


using namespace recipe_keys;

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

// Every key of the recipe through the key table (a preset first: its sizes,
// then explicit model.* keys over them); unknown sections and keys are
// refused with what is known.
Recipe read_keys(const toml::table& root, const std::string& source, const std::set<std::string>& overridden) {
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
  return r;
}

// The sites and what is set per site: a cluster file, emulated links, the
// slowed site.
void check_sites(Recipe& r, const Locate& locate) {
  // With site_by = "node" or "links" and no topology.sites the launch decides
  // the count; the per-site keys are then checked when the sites are cut.
  const bool sites_known = r.topology.site_by == "block" || r.topology.sites_given;
  if (!r.topology.cluster.empty() && r.topology.site_by != "links")
    throw RecipeError(locate("topology", "cluster") + ": topology.cluster is read only with topology.site_by = \"links\"");
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
}

// compression: settings that only one codec reads, and their ranges there.
void check_compression(const Recipe& r, const Locate& locate) {
  const auto& c = r.compression;
  if (c.bits != 2 && c.bits != 4 && c.bits != 8)
    throw RecipeError(locate("compression", "bits") + ": compression.bits must be 2, 4 or 8");
  if (c.codec != "chunk-topk") {
    refuse_set({{"compression.bits", c.bits != 2}}, locate, " applies only to compression.codec = \"chunk-topk\"");
    return;
  }
  if (c.block > (1 << 16))
    throw RecipeError(locate("compression", "block") +
                      ": compression.block is chunk-topk's chunk and must be at most 65536 (the index in a chunk "
                      "travels in 16 bits at most)");
}

// inner: Muon's setting is refused where AdamW trains everything.
void check_inner(const Recipe& r, const Locate& locate) {
  refuse_set({{"inner.muon_momentum",
               r.inner.kind != inner::InnerOptimizerKind::kMuon && r.inner.muon_momentum != 0.95}},
             locate, " applies only to inner.optimizer = \"muon\"");
}

// Streaming overlap's schedule and fragments, and the keys data parallelism
// has no use for.
void check_sync(Recipe& r, const Locate& locate) {
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
  if (r.sync.mode == outer::SyncMode::kDataParallel) {
    // Data parallelism has no rounds of local steps to overlap or schedule and
    // no outer optimizer: keys that would do nothing are refused when set to
    // anything but their defaults (which the effective recipe lists).
    const Recipe d;
    refuse_set({{"sync.overlap", r.sync.overlap != d.sync.overlap},
                {"sync.schedule", r.sync.schedule_mode != d.sync.schedule_mode},
                {"sync.fragments", r.sync.fragments != d.sync.fragments},
                {"sync.overlap_steps", r.sync.overlap_steps != d.sync.overlap_steps},
                {"outer.optimizer", r.outer.kind != d.outer.kind},
                {"outer.lr", r.outer.lr != d.outer.lr},
                {"outer.momentum", r.outer.momentum != d.outer.momentum},
                {"outer.max_update_norm_ratio", r.max_update_norm_ratio != d.max_update_norm_ratio}},
               locate,
               " does not apply to sync.mode = \"data-parallel\" (gradients are averaged every inner step, with no "
               "outer optimizer; sync.H only sets how many steps make one round of metrics)");
  }
}

// Where the steps and the outer state run, and H's bounds.
void check_devices(Recipe& r, const Locate& locate) {
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
}

// The architecture: heads, the keys a kind has no use for, a Llama's own checks.
void check_model(Recipe& r, const Locate& locate) {
  if (r.model.d_model % r.model.n_heads != 0)
    throw RecipeError(locate("model", "n_heads") + ": model.n_heads must divide model.d_model (" +
                      std::to_string(r.model.n_heads) + " does not divide " + std::to_string(r.model.d_model) + ")");
  // Keys a kind has no use for are refused when set, not ignored.
  const bool llama = r.model.kind == inner::ModelKind::kLlama;
  const bool torchscript = r.model.kind == inner::ModelKind::kTorchScript;
  const inner::ModelConfig defaults;
  const std::pair<const char*, bool> unused[] = {{"n_kv_heads", !llama && r.model.n_kv_heads != 0},
                                                 {"ffn_hidden", !llama && r.model.ffn_hidden != 0},
                                                 {"tie_embeddings", !llama && !r.model.tie_embeddings},
                                                 {"rope_theta", !llama && r.model.rope_theta != defaults.rope_theta},
                                                 {"norm_eps", !llama && r.model.norm_eps != defaults.norm_eps},
                                                 {"rope_scaling", !llama && !r.model.rope_scaling.type.empty()},
                                                 {"max_positions", !llama && r.model.max_positions != 0},
                                                 {"path", !torchscript && !r.model.path.empty()}};
  for (const auto& [name, set] : unused)
    if (set)
      throw RecipeError(locate("model", name) + ": model." + name + " does not apply to model.kind = \"" +
                        (llama ? "llama" : torchscript ? "torchscript" : "gpt") + "\"");
  if (torchscript && r.model.path.empty())
    throw RecipeError(locate("model", "kind") + ": model.kind = \"torchscript\" needs model.path (a file torch.jit.save wrote)");
  if (llama) {
    try {
      inner::check_llama_config(r.model);
    } catch (const std::invalid_argument& e) {
      const std::string why = e.what();
      const char* key = why.rfind("model.rope_theta", 0) == 0     ? "rope_theta"
                        : why.rfind("model.norm_eps", 0) == 0     ? "norm_eps"
                        : why.rfind("model.rope_scaling", 0) == 0 ? "rope_scaling"
                        : r.model.n_kv_heads > 0                  ? "n_kv_heads"
                                                                  : "n_heads";
      throw RecipeError(locate("model", key) + ": " + why);
    }
  }
}

// The data keys a format has no use for, and a byte corpus's vocabulary.
void check_data(Recipe& r, const Locate& locate) {
  // Data keys a format has no use for are refused when set, not ignored.
  const auto format = r.data.format;
  if (format != inner::DataFormat::kTokens && r.data.token_dtype != inner::TokenDtype::kAuto)
    throw RecipeError(locate("data", "token_dtype") + ": data.token_dtype applies to data.format = \"tokens\" only");
  if (format != inner::DataFormat::kText && !r.data.tokenizer.empty())
    throw RecipeError(locate("data", "tokenizer") + ": data.tokenizer applies to data.format = \"text\" only");
  if (format == inner::DataFormat::kText && r.data.tokenizer.empty())
    throw RecipeError(locate("data", "format") + ": data.format = \"text\" needs data.tokenizer (a SentencePiece model)");
  // Bytes: every byte must be a token the model knows. (Other formats have
  // their ids checked against model.vocab when the data are opened.)
  if (format == inner::DataFormat::kBytes && r.model.vocab < 256)
    throw RecipeError(locate("model", "vocab") + ": model.vocab (" + std::to_string(r.model.vocab) +
                      ") must be at least 256: the data are bytes (data.format = \"bytes\")");
}

Recipe validate(const toml::table& root, const std::string& source, const std::set<std::string>& overridden) {
  Recipe r = read_keys(root, source, overridden);
  // Checks that involve more than one key name the key a user would change.
  const Locate locate = [&](const std::string& section, const std::string& name) {
    const toml::node* n = root.at_path(section + "." + name).node();
    return n ? where(*n, overridden, section + "." + name, source) : source;
  };
  r.topology.sites_given = root.at_path("topology.sites").node() != nullptr;
  take_folder_architecture(
      r, [&](const std::string& name) { return root.at_path("model." + name).node() != nullptr; },
      [&](const std::string& name) { return locate("model", name); });
  // Error feedback defaults on for lossy codecs (SparseLoCo, DeMo), off for fp32.
  if (!r.compression.error_feedback) r.compression.error_feedback = r.compression.codec != "none";
  check_sites(r, locate);
  check_compression(r, locate);
  check_inner(r, locate);
  check_sync(r, locate);
  check_rendezvous(r, locate);
  check_devices(r, locate);
  check_model(r, locate);
  check_data(r, locate);
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

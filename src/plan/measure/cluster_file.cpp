// Reading and writing the cluster file, with nlohmann-json.
#include "plan/measure/cluster_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "plan/input_error.h"

namespace diloco::plan {
namespace {

using Json = nlohmann::json;

double number_at(const Json& object, const char* key, const std::string& at) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number())
    throw InputError(at + ": missing number \"" + key + "\"");
  const double v = object[key].get<double>();
  if (!std::isfinite(v) || v < 0.0) throw InputError(at + "." + key + " must be a number >= 0");
  return v;
}

int index_at(const Json& object, const char* key, const std::string& at, int count, const char* what) {
  const double v = number_at(object, key, at);
  if (v != std::floor(v) || v >= count)
    throw InputError(at + "." + key + " = " + object[key].dump() + " is not a " + what + " (0.." +
                      std::to_string(count - 1) + ")");
  return static_cast<int>(v);
}

std::string string_at(const Json& object, const char* key, const std::string& at) {
  if (!object.contains(key) || !object[key].is_string()) throw InputError(at + ": missing string \"" + key + "\"");
  return object[key].get<std::string>();
}

// An optional array of durations (`what`: "step time", ...), each > 0
// (empty when absent).
std::vector<double> duration_series(const Json& node, const char* key, const std::string& at, const std::string& what) {
  std::vector<double> out;
  if (!node.contains(key)) return out;
  if (!node[key].is_array()) throw InputError(at + "." + key + " must be an array of " + what + "s (s)");
  for (std::size_t k = 0; k < node[key].size(); ++k) {
    const auto& v = node[key][k];
    const double t = v.is_number() ? v.get<double>() : -1.0;
    if (!std::isfinite(t) || t <= 0.0)
      throw InputError(at + "." + key + "[" + std::to_string(k) + "] must be a" + (std::string("aeiou").find(what[0]) != std::string::npos ? "n " : " ") + what + " > 0 (s)");
    out.push_back(t);
  }
  return out;
}

// Sites launched apart: every node names its site, and the sites are 0, 1,
// ... in rank order, each one block of ranks.
void check_launched_sites(const std::vector<ClusterNode>& nodes, const std::string& path) {
  const auto given = std::count_if(nodes.begin(), nodes.end(), [](const ClusterNode& n) { return n.site >= 0; });
  if (given == 0) return;
  for (const auto& n : nodes) {
    const std::string at = path + ": the node of rank " + std::to_string(n.rank);
    if (n.site < 0) throw InputError(at + " gives no \"site\" while others do (every node or none)");
    const int before = n.rank == 0 ? -1 : nodes[static_cast<std::size_t>(n.rank) - 1].site;
    if (n.site != before && n.site != before + 1)
      throw InputError(at + ": site " + std::to_string(n.site) + " after site " + std::to_string(before) +
                       " (sites are numbered 0, 1, ... in rank order, each one block of ranks)");
  }
}

}  // namespace

std::vector<std::vector<comm::LinkEstimate>> parse_link_pairs(const Json& links, int count, const std::string& where,
                                                              const char* members) {
  if (!links.is_array()) throw InputError(where + ": \"links\" must be an array");
  std::vector<std::vector<comm::LinkEstimate>> m(count, std::vector<comm::LinkEstimate>(count));
  std::vector<std::vector<bool>> seen(count, std::vector<bool>(count, false));
  int index = 0;
  for (const auto& link : links) {
    const std::string at = where + ": links[" + std::to_string(index++) + "]";
    const std::string one = std::string(members).substr(0, std::string(members).size() - 1);  // "sites" -> "site"
    const int a = index_at(link, "a", at, count, one.c_str());
    const int b = index_at(link, "b", at, count, one.c_str());
    if (a == b) throw InputError(at + ": a and b are both " + std::to_string(a));
    if (seen[a][b]) throw InputError(at + ": pair (" + std::to_string(a) + ", " + std::to_string(b) + ") given twice");
    seen[a][b] = seen[b][a] = true;
    const comm::LinkEstimate e{number_at(link, "latency_ms", at) / 1000.0,
                               number_at(link, "bandwidth_mbps", at) * 1e6 / 8.0};
    m[a][b] = m[b][a] = e;
  }
  if (index != count * (count - 1) / 2)
    throw InputError(where + ": " + std::to_string(index) + " pairs for " + std::to_string(count) + " " + members +
                      " (every pair once: " + std::to_string(count * (count - 1) / 2) + ")");
  return m;
}

Cluster read_cluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the cluster file");
  Json doc;
  try {
    doc = Json::parse(in);
  } catch (const Json::parse_error& e) {
    throw InputError(path + ": not JSON (" + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array() || doc["nodes"].empty())
    throw InputError(path + ": needs a non-empty \"nodes\" array (as diloco probe --all-ranks writes it)");
  if (!doc.contains("links")) throw InputError(path + ": needs a \"links\" array");
  const int count = static_cast<int>(doc["nodes"].size());
  Cluster c;
  c.nodes.resize(static_cast<std::size_t>(count));
  std::vector<bool> seen(static_cast<std::size_t>(count), false);
  for (int i = 0; i < count; ++i) {
    const auto& node = doc["nodes"][static_cast<std::size_t>(i)];
    const std::string at = path + ": nodes[" + std::to_string(i) + "]";
    if (!node.is_object()) throw InputError(at + " is not an object");
    const int rank = index_at(node, "rank", at, count, "rank of the nodes listed");
    if (seen[rank]) throw InputError(at + ".rank: rank " + std::to_string(rank) + " given twice");
    seen[rank] = true;
    ClusterNode& n = c.nodes[static_cast<std::size_t>(rank)];
    n.rank = rank;
    n.host = string_at(node, "host", at);
    n.device = string_at(node, "device", at);
    n.memory_bytes = number_at(node, "memory_bytes", at);
    n.step_s = number_at(node, "step_s", at);
    if (n.memory_bytes <= 0.0) throw InputError(at + ".memory_bytes must be > 0");
    if (n.step_s <= 0.0) throw InputError(at + ".step_s must be > 0");
    if (node.contains("runtime_bytes")) n.runtime_bytes = number_at(node, "runtime_bytes", at);
    n.steps = duration_series(node, "steps", at, "step time");
    n.exchanges = duration_series(node, "exchanges", at, "exchange time");
    n.controls = duration_series(node, "controls", at, "all-reduce time");
    if (node.contains("overlap_slowdown")) {
      n.overlap_slowdown = number_at(node, "overlap_slowdown", at);
      if (n.overlap_slowdown <= 0.0) throw InputError(at + ".overlap_slowdown must be > 0");
    }
    if (node.contains("site")) n.site = index_at(node, "site", at, count, "site");
    if (node.contains("cores")) {
      const double cores = number_at(node, "cores", at);
      if (cores < 1.0 || cores != static_cast<double>(static_cast<int>(cores)))
        throw InputError(at + ".cores must be a whole number >= 1");
      n.cores = static_cast<int>(cores);
    }
  }
  check_launched_sites(c.nodes, path);
  c.links = parse_link_pairs(doc["links"], count, path, "ranks");
  const bool timed = std::any_of(c.nodes.begin(), c.nodes.end(), [](const auto& n) { return !n.exchanges.empty(); });
  if (timed) c.exchange_codec = string_at(doc, "exchange_codec", path + ": nodes give \"exchanges\"; the file");
  return c;
}

nlohmann::ordered_json cluster_json(const Cluster& cluster) {
  nlohmann::ordered_json doc;
  doc["nodes"] = nlohmann::ordered_json::array();
  for (const auto& n : cluster.nodes) {
    doc["nodes"].push_back({{"rank", n.rank},
                            {"host", n.host},
                            {"device", n.device},
                            {"memory_bytes", n.memory_bytes},
                            {"step_s", n.step_s}});
    if (n.runtime_bytes > 0.0) doc["nodes"].back()["runtime_bytes"] = n.runtime_bytes;
    if (!n.steps.empty()) doc["nodes"].back()["steps"] = n.steps;
    if (n.overlap_slowdown > 0.0) doc["nodes"].back()["overlap_slowdown"] = n.overlap_slowdown;
    if (!n.exchanges.empty()) doc["nodes"].back()["exchanges"] = n.exchanges;
    if (!n.controls.empty()) doc["nodes"].back()["controls"] = n.controls;
    if (n.site >= 0) doc["nodes"].back()["site"] = n.site;
    if (n.cores > 0) doc["nodes"].back()["cores"] = n.cores;
  }
  doc["links"] = pairs_json(cluster.links);
  if (!cluster.exchange_codec.empty()) doc["exchange_codec"] = cluster.exchange_codec;
  return doc;
}

nlohmann::ordered_json pairs_json(const std::vector<std::vector<comm::LinkEstimate>>& links) {
  auto pairs = nlohmann::ordered_json::array();
  const std::size_t n = links.size();
  for (std::size_t k = 0; k < n * n; ++k) {
    const std::size_t a = k / n, b = k % n;
    if (b <= a) continue;
    const auto& e = links[a][b];
    pairs.push_back(
        {{"a", a}, {"b", b}, {"latency_ms", e.latency_s * 1e3}, {"bandwidth_mbps", e.bandwidth_bytes_per_s * 8e-6}});
  }
  return pairs;
}

std::vector<std::vector<double>> bandwidth_matrix(const std::vector<std::vector<comm::LinkEstimate>>& links) {
  std::vector<std::vector<double>> m(links.size(), std::vector<double>(links.size(), 0.0));
  for (std::size_t a = 0; a < links.size(); ++a)
    for (std::size_t b = 0; b < links.size(); ++b) m[a][b] = links[a][b].bandwidth_bytes_per_s;
  return m;
}

}  // namespace diloco::plan

// Recipe keys, declared once each (name, type, range, field): the helpers
// that build a key, and the table every parse, override and dump walks.
// Internal to the recipe library.
#pragma once

#include <charconv>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "app/recipe.h"

namespace diloco::app::recipe_keys {

inline std::string where(const toml::node& node, const std::set<std::string>& overridden, const std::string& dotted,
                  const std::string& fallback) {
  if (overridden.count(dotted)) return "--set " + dotted;
  const auto& src = node.source();
  std::ostringstream out;
  out << (src.path ? *src.path : fallback);
  if (src.begin.line > 0) out << ":" << src.begin.line << ":" << src.begin.column;
  return out.str();
}

inline std::string describe(const toml::node& node) {
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
inline std::string float_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string out(buf, end);
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

inline std::string string_text(const std::string& v) {
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
inline Key top_number_key(std::string section, std::string name, double Recipe::*field, std::function<bool(double)> ok,
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


// Integer keys with no natural bound take at most this.
constexpr std::int64_t kBig = std::int64_t{1} << 40;

// The [debug] section's keys (recipe_keys_debug.cpp).
void debug_keys(std::vector<Key>& k);

// Every key, in the order the effective recipe lists them.
const std::vector<Key>& keys();

// When model.init_from names a model folder (config.json): sets r.model from
// it, after checking that every model key the recipe gives (`given("d_model")`)
// agrees; `locate("d_model")` names where a key was set. Throws RecipeError
// naming both values.
void take_folder_architecture(Recipe& r, const std::function<bool(const std::string&)>& given,
                              const std::function<std::string(const std::string&)>& locate);

}  // namespace diloco::app::recipe_keys

// The report page: a summary table made here, the charts drawn in the
// browser by report.js from the rows embedded as JSON.
#include "metrics/report_page.h"

#include <cstdio>
#include <sstream>

#include "metrics/report_assets.h"

namespace diloco::metrics {
namespace {

using Json = nlohmann::ordered_json;

std::optional<double> number(const Json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<double> last_eval(const RunRows& run) {
  for (auto it = run.rows.rbegin(); it != run.rows.rend(); ++it)
    if (auto e = number(*it, "eval_loss")) return e;
  return std::nullopt;
}

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string fixed(std::optional<double> v, const char* format, const char* none = "-") {
  if (!v) return none;
  char buf[48];
  std::snprintf(buf, sizeof(buf), format, *v);
  return buf;
}

std::string megabytes(std::optional<double> bytes) {
  return bytes ? fixed(*bytes / 1e6, *bytes < 1e7 ? "%.2f MB" : "%.0f MB") : "-";
}

// Header and cells of the summary, shared by the text and the HTML table.
std::vector<std::vector<std::string>> summary_cells(const std::vector<RunSummary>& summary) {
  std::vector<std::vector<std::string>> cells{{"run", "rounds", "final eval loss", "final train loss", "vs first",
                                               "bytes between sites", "wall s", "tokens", "to first's loss: s",
                                               "to first's loss: bytes"}};
  for (const auto& s : summary) {
    const bool reached = s.to_first_s.has_value();
    cells.push_back({s.name, std::to_string(s.rounds), fixed(s.final_eval_loss, "%.4f"),
                     fixed(s.final_train_loss, "%.4f"), fixed(s.vs_first ? std::optional(100 * *s.vs_first) : std::nullopt, "%+.1f%%"),
                     megabytes(s.bytes_sent), fixed(s.wall_s, "%.1f"), fixed(s.tokens, "%.0f"),
                     reached ? fixed(s.to_first_s, "%.1f") : "not reached",
                     reached ? megabytes(s.to_first_bytes) : "not reached"});
  }
  return cells;
}

std::string summary_html(const std::vector<RunSummary>& summary) {
  std::string out = "<table id=\"summary\">";
  const auto cells = summary_cells(summary);
  for (std::size_t r = 0; r < cells.size(); ++r) {
    out += "<tr>";
    for (const auto& c : cells[r]) out += (r == 0 ? "<th>" : "<td>") + escape_html(c) + (r == 0 ? "</th>" : "</td>");
    out += "</tr>";
  }
  return out + "</table>";
}

// The rows as JSON that cannot close the script element holding it.
std::string runs_json(const std::vector<RunRows>& runs) {
  Json all = Json::array();
  for (const auto& run : runs) all.push_back({{"name", run.name}, {"rows", run.rows}});
  std::string text = all.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += "<\\";
    else out += text[i];
  }
  return out;
}

}  // namespace

std::vector<RunSummary> summarize(const std::vector<RunRows>& runs) {
  std::vector<RunSummary> out;
  const std::optional<double> target = runs.empty() ? std::nullopt : last_eval(runs.front());
  for (const auto& run : runs) {
    RunSummary s;
    s.name = run.name;
    if (!run.rows.empty()) {
      const Json& last = run.rows.back();
      s.rounds = static_cast<int>(number(last, "round").value_or(0));
      s.final_train_loss = number(last, "train_loss").value_or(0.0);
      s.bytes_sent = number(last, "bytes_sent").value_or(0.0);
      s.wall_s = number(last, "wall_s").value_or(0.0);
      s.tokens = number(last, "tokens").value_or(0.0);
    }
    s.final_eval_loss = last_eval(run);
    if (target && s.final_eval_loss) s.vs_first = *s.final_eval_loss / *target - 1.0;
    for (const auto& row : run.rows) {
      const auto e = number(row, "eval_loss");
      if (target && e && *e <= *target + 1e-9) {
        s.to_first_s = number(row, "wall_s");
        s.to_first_bytes = number(row, "bytes_sent");
        break;
      }
    }
    out.push_back(s);
  }
  return out;
}

std::string summary_text(const std::vector<RunSummary>& summary) {
  const auto cells = summary_cells(summary);
  std::vector<std::size_t> width(cells[0].size(), 0);
  for (const auto& row : cells)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream out;
  for (const auto& row : cells) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      out << (c ? "  " : "") << (c == 0 ? row[c] + pad : pad + row[c]);
    }
    out << "\n";
  }
  return out.str();
}

std::string render_report(const std::vector<RunRows>& runs, const std::string& title) {
  std::ostringstream page;
  page << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" << escape_html(title)
       << "</title>\n<style>" << report_css() << "</style>\n"
       // Errors of the page's own scripts are kept where a test can read them.
       << "<script>window.addEventListener('error', (e) => { document.documentElement.dataset.errors = "
          "(document.documentElement.dataset.errors || '') + e.message + '\\n'; });</script>\n"
       << "<script>" << chart_js() << "</script>\n</head>\n<body>\n<h1>" << escape_html(title) << "</h1>\n"
       << "<p class=\"meta\">" << runs.size() << " run(s). Losses: eval solid with points, train dashed. The loss "
       << "charts leave out each series' first tenth when choosing the y range (a button shows the whole). Click "
       << "a legend entry to hide its series. The to-target columns measure against the first run's final eval "
       << "loss.</p>\n<h2>Summary</h2>\n"
       << summary_html(summarize(runs)) << "\n<h2>Loss</h2><div id=\"loss\"></div>\n"
       << "<h2>Sites: utilization, H, throughput</h2><div id=\"sites\"></div>\n"
       << "<h2>Links</h2><div id=\"links\"></div>\n<h2>Membership</h2><div id=\"membership\"></div>\n"
       << "<script type=\"application/json\" id=\"runs\">" << runs_json(runs) << "</script>\n"
       << "<script>" << report_js() << "</script>\n</body></html>\n";
  return page.str();
}

}  // namespace diloco::metrics

// Files built into the binary for the report page: Chart.js (from the npm
// registry, fetched by scripts/setup) and the page's own script and style.
#pragma once

#include <string_view>

namespace diloco::metrics {

std::string_view chart_js();
std::string_view report_js();
std::string_view report_css();

}  // namespace diloco::metrics

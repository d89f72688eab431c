// The report's assets as bytes of this object file (.incbin), so the page
// needs no file beside the binary. CMake passes the paths (and rebuilds
// this file when one changes).
#include "metrics/report_assets.h"

#define DILOCO_ASSET(name, path)                                                              \
  __asm__(".section .rodata\n.global diloco_asset_" #name "\ndiloco_asset_" #name ":\n"       \
          ".incbin \"" path "\"\n.global diloco_asset_" #name "_end\ndiloco_asset_" #name     \
          "_end:\n.byte 0\n.previous\n");                                                     \
  extern "C" const char diloco_asset_##name[];                                                \
  extern "C" const char diloco_asset_##name##_end[];

DILOCO_ASSET(chart_js, DILOCO_CHART_JS_PATH)
DILOCO_ASSET(report_js, DILOCO_REPORT_JS_PATH)
DILOCO_ASSET(report_css, DILOCO_REPORT_CSS_PATH)

namespace diloco::metrics {

std::string_view chart_js() { return {diloco_asset_chart_js, static_cast<std::size_t>(diloco_asset_chart_js_end - diloco_asset_chart_js)}; }
std::string_view report_js() { return {diloco_asset_report_js, static_cast<std::size_t>(diloco_asset_report_js_end - diloco_asset_report_js)}; }
std::string_view report_css() { return {diloco_asset_report_css, static_cast<std::size_t>(diloco_asset_report_css_end - diloco_asset_report_css)}; }

}  // namespace diloco::metrics

// `diloco status` and `diloco report`: a run seen from its output folder,
// while it trains or after.
#pragma once

namespace diloco::app {

// diloco status RUN_DIR: the latest round of each site's metrics; returns the exit code.
int run_status(int argc, char** argv);
// diloco report RUN_DIR... --out FILE: the HTML report; returns the exit code.
int run_report(int argc, char** argv);

}  // namespace diloco::app

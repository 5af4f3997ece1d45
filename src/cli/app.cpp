#include "src/cli/app.hpp"

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "seqattn/error.hpp"
#include "src/cli/commands.hpp"

namespace seqattn::cli {

std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>(
      "seqattn: fast CPU attention (dense, sliding window, linear, Linformer, hierarchical)",
      "seqattn");
  app->require_subcommand(1);
  app->fallthrough(false);
  add_run_command(*app);
  add_bench_command(*app);
  add_select_command(*app);
  add_calibrate_command(*app);
  add_report_command(*app);
  add_mha_command(*app);
  return app;
}

int run_app(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return e.kind() == ErrorKind::kNotImplemented ? 3 : 2;
  } catch (const std::exception& e) {
    std::cerr << "seqattn: unexpected failure: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace seqattn::cli

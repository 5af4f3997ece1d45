// The seqattn command-line tool. Exit codes: 0 success, 1 unexpected failure, 2 bad input or
// I/O (seqattn::Error kInvalidArgument / kUnsupported / kIo), 3 a variant that is not built yet
// (kNotImplemented); CLI11's own codes (>= 100) for malformed command lines.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli/commands.hpp"
#include "seqattn/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"seqattn: fast CPU attention (dense, sliding window, linear, Linformer)", "seqattn"};
  app.require_subcommand(1);
  app.fallthrough(false);
  seqattn::cli::add_run_command(app);
  seqattn::cli::add_bench_command(app);
  seqattn::cli::add_select_command(app);
  seqattn::cli::add_calibrate_command(app);
  seqattn::cli::add_report_command(app);
  seqattn::cli::add_mha_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const seqattn::Error& e) {
    std::cerr << e.what() << "\n";
    return e.kind() == seqattn::ErrorKind::kNotImplemented ? 3 : 2;
  } catch (const std::exception& e) {
    std::cerr << "seqattn: unexpected failure: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

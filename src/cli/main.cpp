// The seqattn command-line tool; src/cli/app.hpp documents its exit codes.
#include <CLI/CLI.hpp>

#include "src/cli/app.hpp"

int main(int argc, char** argv) {
  const auto app = seqattn::cli::make_app();
  return seqattn::cli::run_app(*app, argc, argv);
}

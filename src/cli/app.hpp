// The seqattn command line as a library: main() and the command-line fuzzer share it.
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace seqattn::cli {

// Every subcommand registered on one CLI::App.
std::unique_ptr<CLI::App> make_app();

// Parses argv, runs the chosen subcommand and returns the process exit code: 0 success,
// 1 unexpected failure, 2 bad input or I/O (seqattn::Error kInvalidArgument / kUnsupported /
// kIo), 3 a variant that is not built yet (kNotImplemented); CLI11's own codes for malformed
// command lines. Messages go to std::cerr (CLI11's help to std::cout).
int run_app(CLI::App& app, int argc, const char* const* argv);

}  // namespace seqattn::cli

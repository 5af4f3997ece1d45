// libFuzzer target: the seqattn command line. An input is a command line, one argument per
// line. `run`, `select` and `mha` run for real in a scratch directory holding small .npy
// inputs; `bench`, `report` and `calibrate` are only parsed and validated (a benchmark per
// input would be too slow to fuzz). Checked on every input:
//   - the exit code is 0, 2, 3 or CLI11's (>= 100): never 1, the code for an exception other
//     than seqattn::Error;
//   - on failure every input file is exactly as it was and no other file exists (nothing is
//     written, no staged temporary is left behind);
//   - on success every new file is one the command line named (as an argument, or as the
//     value of an `--option=value` argument).
// Arguments containing '/' are skipped so that no input can reach outside the scratch
// directory. Each input runs with the scratch directory as the working directory and restores
// the fuzzer's afterwards (libFuzzer writes its corpus relative to it).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/cli/app.hpp"
#include "src/cli/npy.hpp"

namespace fs = std::filesystem;

namespace {

using Files = std::map<std::string, std::string>;  // name -> bytes

std::vector<float> ramp(std::size_t n, float step) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>((i * 7) % 11) * step - 1.0f;
  return values;
}

std::string npy_file(const std::vector<std::int64_t>& shape, float step) {
  std::size_t n = 1;
  for (const std::int64_t e : shape) n *= static_cast<std::size_t>(e);
  return seqattn::npy::encode(shape, ramp(n, step).data());
}

// The inputs every command line can name: attention q/k/v in both ranks and a half file, and
// an MHA layer (x [2, 5, 8], square 8x8 weights, 8-vectors).
const Files& input_files() {
  static const Files files = [] {
    Files f;
    f["q.npy"] = npy_file({1, 2, 5, 4}, 0.3f);
    f["k.npy"] = npy_file({1, 2, 6, 4}, 0.2f);
    f["v.npy"] = npy_file({1, 2, 6, 4}, 0.1f);
    f["q2.npy"] = npy_file({5, 4}, 0.25f);
    f["kv2.npy"] = npy_file({7, 4}, 0.15f);
    const std::vector<std::uint16_t> half(5 * 4, 0x3c00);  // 1.0 in fp16, 1.0078 in bf16
    f["h.npy"] = seqattn::npy::encode({5, 4}, seqattn::DType::kF16, half.data());
    f["x.npy"] = npy_file({2, 5, 8}, 0.2f);
    f["w.npy"] = npy_file({8, 8}, 0.05f);
    f["b.npy"] = npy_file({8}, 0.1f);
    f["bad.npy"] = "\x93NUMPY\x01";
    return f;
  }();
  return files;
}

Files read_directory() {
  Files now;
  for (const auto& entry : fs::directory_iterator(fs::current_path())) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    now[entry.path().filename().string()] = bytes.str();
  }
  return now;
}

[[noreturn]] void finding(const char* what, const std::string& name) {
  std::fprintf(stderr, "fuzz_cli: %s '%s'\n", what, name.c_str());
  std::abort();
}

fs::path& scratch_directory() {
  static fs::path path;
  return path;
}

void reset_directory() {
  for (const auto& entry : fs::directory_iterator(fs::current_path())) fs::remove_all(entry.path());
  for (const auto& [name, bytes] : input_files()) {
    std::ofstream(name, std::ios::binary) << bytes;
  }
}

// Thrown once a parse-only command line has been parsed and validated by CLI11, before the
// command's callback would run it. Not a std::exception, so run_app lets it through.
struct ParsedOnly {};

std::unique_ptr<CLI::App> fuzzing_app() {
  auto app = seqattn::cli::make_app();
  for (const char* name : {"bench", "report", "calibrate"}) {
    app->get_subcommand(name)->parse_complete_callback([] { throw ParsedOnly{}; });
  }
  return app;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char scratch[] = "/tmp/seqattn_fuzz_cli_XXXXXX";
  if (mkdtemp(scratch) == nullptr) std::abort();
  scratch_directory() = scratch;
  // Help and error text would flood the fuzzer's log; its own reports use stdio, not iostreams.
  static std::ostringstream sink;
  std::cout.rdbuf(sink.rdbuf());
  std::cerr.rdbuf(sink.rdbuf());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"seqattn"};
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(lines, line) && args.size() < 40;) {
    line = line.substr(0, line.find('\0'));  // what a C argv string would hold
    if (line.find('/') != std::string::npos) return 0;
    args.push_back(line);
  }
  const fs::path fuzzer_directory = fs::current_path();
  fs::current_path(scratch_directory());
  reset_directory();
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  const auto app = fuzzing_app();
  int code = 0;
  try {
    code = seqattn::cli::run_app(*app, static_cast<int>(argv.size()), argv.data());
  } catch (const ParsedOnly&) {
    code = 0;
  }
  if (code == 1) finding("an exception other than seqattn::Error escaped", args[1]);

  const Files after = read_directory();
  std::set<std::string> named(args.begin(), args.end());
  for (const std::string& a : args) {  // `--out=x.npy` names x.npy (a finding: `--out=-xnpy`)
    const auto equals = a.find('=');
    if (a.starts_with("-") && equals != std::string::npos) named.insert(a.substr(equals + 1));
  }
  for (const auto& [name, bytes] : after) {
    const auto input = input_files().find(name);
    const bool unchanged = input != input_files().end() && input->second == bytes;
    if (code != 0 && !unchanged) finding("a failed command wrote or changed", name);
    if (code == 0 && !unchanged && named.count(name) == 0) finding("a stray file", name);
  }
  if (code != 0 && after.size() != input_files().size())
    finding("a failed command removed", "an input");
  fs::current_path(fuzzer_directory);
  return 0;
}

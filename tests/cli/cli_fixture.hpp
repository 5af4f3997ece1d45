// The seqattn executable as a subprocess (its path from the build, SEQATTN_CLI_PATH), run in
// a per-test temporary directory: shared by the command-line tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/cli/npy.hpp"
#include "tests/support/temp_dir_test.hpp"

namespace seqattn {

struct Result {
  int exit_code = -1;
  std::string out, err;
};

class CliTest : public testing::TempDirTest {
 protected:
  Result run(const std::string& args) const {
    const std::string command = std::string("'") + SEQATTN_CLI_PATH + "' " + args + " >'" +
                                path("stdout.txt") + "' 2>'" + path("stderr.txt") + "'";
    const int status = std::system(command.c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read(path("stdout.txt"));
    r.err = read(path("stderr.txt"));
    std::remove(path("stdout.txt").c_str());
    std::remove(path("stderr.txt").c_str());
    return r;
  }
  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void save(const std::string& name, const std::vector<std::int64_t>& shape,
            const std::vector<float>& values) const {
    npy::write_file_atomically(path(name), npy::encode(shape, values.data()), "test");
  }
  bool exists(const std::string& name) const { return ::access(path(name).c_str(), F_OK) == 0; }

  // The document example (seed 000): Q = X W_Q, K = X W_K, V = X W_V with d_k = 2.
  void write_document_example() const {
    const double x[3][2] = {{1, 0}, {1, 1}, {0.1, 1}};
    const double wq[2][2] = {{1, 0}, {0, 1}}, wk[2][2] = {{1, 1}, {1, 1}},
                 wv[2][2] = {{1, 0}, {1, 1}};
    auto project = [&](const double(&w)[2][2]) {
      std::vector<float> m;
      for (const auto& row : x) {
        for (int c = 0; c < 2; ++c)
          m.push_back(static_cast<float>(row[0] * w[0][c] + row[1] * w[1][c]));
      }
      return m;
    };
    save("q.npy", {3, 2}, project(wq));
    save("k.npy", {3, 2}, project(wk));
    save("v.npy", {3, 2}, project(wv));
  }
};

}  // namespace seqattn

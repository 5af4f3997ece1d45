// seqattn was configured without MPI: --ring is a declared feature that is not built here.
#include "seqattn/error.hpp"
#include "src/cli/ring_bench.hpp"

namespace seqattn::cli {

void bench_ring(const RingBenchSpec&) {
  throw Error(ErrorKind::kNotImplemented, "--ring", "a seqattn built with MPI (seqattn::mpi)",
              "this build has no MPI",
              "apt-get install libopenmpi-dev openmpi-bin, then rebuild (scripts/build)");
}

nlohmann::json launch_ring_bench(int, const Shape&, std::int64_t, bool, std::string& error) {
  error = "seqattn was built without MPI (apt-get install libopenmpi-dev openmpi-bin)";
  return {};
}

}  // namespace seqattn::cli

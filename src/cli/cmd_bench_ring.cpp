#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>

#include "seqattn/error.hpp"
#include "seqattn/mpi/ring.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/ring_bench.hpp"

namespace seqattn::cli {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double max_over_ranks(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

double sum_over_ranks(double x) {
  double s = 0;
  MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return s;
}

// The communication of one dense ring pass alone (P - 1 shifts of this rank's K/V block), for
// the "hidden" figure: what the ring would cost if nothing overlapped it.
double ring_pass_seconds(std::vector<float>& block, int rank, int ranks) {
  std::vector<float> other(block.size());
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  for (int step = 0; step + 1 < ranks; ++step) {
    MPI_Sendrecv(block.data(), static_cast<int>(block.size()), MPI_FLOAT, (rank + 1) % ranks, 9,
                 other.data(), static_cast<int>(other.size()), MPI_FLOAT,
                 (rank - 1 + ranks) % ranks, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    std::swap(block, other);
  }
  return max_over_ranks(now() - t0);
}

struct RankShards {
  std::int64_t n;
  std::vector<float> q, kv, out;  // kv: k then v
};

RankShards random_shards(const Shape& s, std::int64_t n, int rank) {
  RankShards r{n, {}, {}, {}};
  std::mt19937 gen(static_cast<unsigned>(17 + rank));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  r.q.resize(static_cast<std::size_t>(s.batch * s.heads * n * s.dim));
  r.kv.resize(static_cast<std::size_t>(s.batch * s.kv_heads * n * (s.dim + s.dim_v)));
  r.out.resize(static_cast<std::size_t>(s.batch * s.heads * n * s.dim_v));
  for (float& x : r.q) x = u(gen);
  for (float& x : r.kv) x = u(gen);
  return r;
}

// The running seqattn binary, so that mpirun starts the same build.
std::string self_path() {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<std::size_t>(n)) : std::string("seqattn");
}

}  // namespace

// One `mpirun -np P seqattn bench --ring --json` run; its JSON, or a reason in `error`.
nlohmann::json launch_ring_bench(int ranks, const Shape& s, std::int64_t seq, bool causal,
                                 std::string& error) {
  std::string cmd = std::string(SEQATTN_MPIEXEC) +
                    (::geteuid() == 0 ? " --allow-run-as-root" : "") +
                    " --oversubscribe -x OMP_NUM_THREADS=1 -np " + std::to_string(ranks) + " '" +
                    self_path() + "' bench --ring --json --threads 1 --repeat 3 --warmup 1" +
                    " --batch " + std::to_string(s.batch) + " --heads " + std::to_string(s.heads) +
                    " --dim " + std::to_string(s.dim) + " --seq " + std::to_string(seq) +
                    (causal ? " --causal" : "") + " 2>&1";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    error = "could not start: " + cmd;
    return {};
  }
  std::string text;
  std::array<char, 4096> chunk{};
  while (std::fgets(chunk.data(), static_cast<int>(chunk.size()), pipe)) text += chunk.data();
  const int status = ::pclose(pipe);
  const std::size_t brace = text.find('{');
  if (status != 0 || brace == std::string::npos) {
    error = "`" + cmd + "` failed (status " + std::to_string(status) + "): " + text.substr(0, 400);
    return {};
  }
  return nlohmann::json::parse(text.substr(brace), nullptr, false);
}

void bench_ring(const RingBenchSpec& spec) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) MPI_Init(nullptr, nullptr);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Shape& s = spec.shape;
  const mpi::ShardLayout layout =
      mpi::shard_layout(s.seq, ranks, mpi::default_sharding(spec.options));
  RankShards shards = random_shards(s, layout.shard_length(rank), rank);
  const std::int64_t n = shards.n;
  const ConstTensor q = bhsd<const float>(shards.q.data(), s.batch, s.heads, n, s.dim);
  const ConstTensor k = bhsd<const float>(shards.kv.data(), s.batch, s.kv_heads, n, s.dim);
  const ConstTensor v = bhsd<const float>(shards.kv.data() + s.batch * s.kv_heads * n * s.dim,
                                          s.batch, s.kv_heads, n, s.dim_v);
  const Tensor out = bhsd(shards.out.data(), s.batch, s.heads, n, s.dim_v);
  std::vector<double> total, wait, compute, single;
  std::optional<Workload> whole;
  if (spec.baseline && rank == 0) whole.emplace(s);
  // Planned once, as a serving loop would: the agreement and the block plans are not timed.
  const mpi::RingPlan plan = mpi::make_ring_plan(
      MPI_COMM_WORLD, {s.batch, s.heads, s.kv_heads, n, n, s.dim, s.dim_v}, spec.options);
  mpi::RingRecord last;
  for (int i = 0; i < spec.warmup + spec.repeat; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (whole) single.push_back(time_attend(*whole, spec.options, 0, 1).median_seconds);
    MPI_Barrier(MPI_COMM_WORLD);
    last = plan.run(q, k, v, out);
    const double t = max_over_ranks(last.seconds), w = max_over_ranks(last.wait_seconds);
    const double c = max_over_ranks(last.compute_seconds);
    if (i < spec.warmup) {
      if (whole) single.pop_back();
      continue;
    }
    total.push_back(t);
    wait.push_back(w);
    compute.push_back(c);
  }
  const double flops = sum_over_ranks(last.flops);
  const double sent = sum_over_ranks(last.bytes_sent);
  const bool band = std::holds_alternative<SlidingWindowSpec>(spec.options.variant);
  const double pass = band ? 0.0 : ring_pass_seconds(shards.kv, rank, ranks);
  const double t = median(total), w = median(wait);
  if (rank == 0) {
    const double hidden = std::max(0.0, pass - w);
    nlohmann::json j = {
        {"ring", true},
        {"ranks", ranks},
        {"threads", last.threads},
        {"variant", std::string(to_string(variant_of(spec.options.variant)))},
        {"causal", spec.options.mask.causal},
        {"sharding", layout.sharding == mpi::Sharding::kZigZag ? "zig-zag" : "contiguous"},
        {"batch", s.batch},
        {"heads", s.heads},
        {"kv_heads", s.kv_heads},
        {"seq", s.seq},
        {"dim", s.dim},
        {"median_ms", t * 1e3},
        {"compute_ms", median(compute) * 1e3},
        {"wait_ms", w * 1e3},
        {"wait_fraction", w / t},
        {"comm_alone_ms", pass * 1e3},
        {"comm_hidden_ms", hidden * 1e3},
        {"bytes_sent", sent},
        {"gflops", number_or_null(flops / t * 1e-9)},
        {"repeat", spec.repeat}};
    if (spec.json) {
      std::cout << j.dump(2) << std::endl;
    } else {
      std::printf(
          "ring %s%s (%s shards) B=%lld H=%lld H_kv=%lld S=%lld D=%lld over %d ranks x %d "
          "threads: median %.2f ms, %.1f GFLOP/s; blocked on communication %.2f ms (%.1f%% of "
          "the call); a ring pass alone %.2f ms, %.2f ms of it hidden behind compute; %.1f MB "
          "sent\n",
          j["variant"].get<std::string>().c_str(), spec.options.mask.causal ? " causal" : "",
          j["sharding"].get<std::string>().c_str(), static_cast<long long>(s.batch),
          static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads),
          static_cast<long long>(s.seq), static_cast<long long>(s.dim), ranks, last.threads,
          t * 1e3, flops / t * 1e-9, w * 1e3, 100 * w / t, pass * 1e3, hidden * 1e3, sent * 1e-6);
      if (whole) {
        std::printf(
            "one process, same threads, whole sequence (interleaved): median %.2f ms; "
            "ring speed-up %.2fx\n",
            median(single) * 1e3, median(single) / t);
      }
    }
  }
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!initialised && !finalised) MPI_Finalize();
}

}  // namespace seqattn::cli

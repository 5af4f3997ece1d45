// make_plan() and AttentionPlan::run(): validate and derive once, then bind views and run.
#include "seqattn/plan.hpp"

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string>

#include "seqattn/error.hpp"
#include "src/api/kv_cache_access.hpp"
#include "src/api/paged_kv_cache_access.hpp"
#include "src/api/plan_state.hpp"
#include "src/kernel/compute_path.hpp"
#include "src/kernel/decode/prefetch_level.hpp"
#include "src/kernel/softmax_attention_cost.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/staging.hpp"
#include "src/runtime/threads.hpp"
#include "src/runtime/validate.hpp"
#include "src/runtime/workspace.hpp"
#include "src/simd/highway_target.hpp"
#include "variants/variant_row.hpp"

namespace seqattn {
namespace {

using Clock = std::chrono::steady_clock;
using detail::fail;

using detail::str;

struct Resolved {
  VariantSpec spec;
  std::string reason;
};

Resolved resolve(const VariantSpec& requested, const detail::Problem& p) {
  const auto* automatic = std::get_if<AutoSpec>(&requested);
  if (automatic == nullptr) {
    return {requested, "requested explicitly"};
  }
  Selection sel = select_variant(automatic->policy, p.seq_k(), automatic->max_error);
  return {as_variant_spec(sel.spec), std::move(sel.reason)};
}

std::size_t round64(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

// The cache path's structure: the row's rule (none for a variant that does not run over a
// cache), the split and the workspace.
void plan_cache_path(detail::PlanState& st) {
  const AttentionShape& s = st.shape;
  const detail::VariantRow& row = detail::row_of(st.id);
  if (row.over_cache != nullptr) {
    const std::optional<ConcreteSpec> concrete = as_concrete_spec(st.spec);
    if (concrete) st.cache_rule = row.over_cache(*concrete);
  }
  st.split = detail::cache_split(s.batch, s.heads_kv, s.heads_q / s.heads_kv, s.seq_q, s.seq_k);
  st.cache_workspace_bytes =
      round64(4 * detail::cache_workspace_floats(st.split, s.batch, s.heads_kv, s.dim, s.dim_v,
                                                 st.planned.threads));
  // A paged batch's lengths and block tables, gathered for the kernel (PagedView).
  const std::size_t table_width =
      static_cast<std::size_t>((s.seq_k + detail::kKvBlock - 1) / detail::kKvBlock);
  st.paged_table_bytes = round64(8 * static_cast<std::size_t>(s.batch) * (1 + table_width));
  // A half q or out (or q rounded by fp32_precision) is staged in fp32 (detail::F32Staging):
  // each buffer 64-byte aligned.
  const auto rows = static_cast<std::size_t>(s.batch * s.heads_q * s.seq_q);
  st.staging_bytes = round64(4 * rows * static_cast<std::size_t>(s.dim)) +
                     round64(4 * rows * static_cast<std::size_t>(s.dim_v));
}

RunRecord record_of(const detail::PlanState& st, const detail::Cost& cost, int threads,
                    Clock::time_point start, detail::ComputePath path) {
  RunRecord record;
  record.variant = st.id;
  record.reason = *st.reason;
  record.reason_storage = st.reason;
  record.flops = cost.flops;
  record.bytes = cost.bytes;
  record.threads = detail::team_here(threads);
  record.simd_target = simd::backend_target_name();
  record.compute_path = detail::to_string(path);
  record.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return record;
}

// The variant's scratch for a run over q, k, v on the dispatched target and `path`
// (PreparedVariant::workspace_bytes, or weights_workspace_bytes with weights): counted on its
// first query or run and kept (each target blocks its tiles its own way, and the tile products
// pack tiles of their own shape).
std::optional<std::size_t> qkv_variant_bytes(const detail::PlanState& st, bool weights,
                                             detail::ComputePath path) {
  const auto& counts = weights ? st.qkv_counts->weights : st.qkv_counts->plain;
  return counts.get(path, [&] {
    detail::Problem p = st.planned;
    p.compute_path = path;
    return weights ? st.prepared->weights_workspace_bytes(p) : st.prepared->workspace_bytes(p);
  });
}

}  // namespace

AttentionShape cache_shape(const KvCacheShape& cache, std::int64_t heads_q, std::int64_t seq_q) {
  return {cache.batch, heads_q, cache.heads_kv, seq_q, cache.capacity, cache.dim, cache.dim_v};
}

AttentionShape paged_shape(const PagedKvCacheShape& cache, std::int64_t batch, std::int64_t heads_q,
                           std::int64_t seq_q, std::int64_t max_length) {
  return {batch, heads_q, cache.heads_kv, seq_q, max_length, cache.dim, cache.dim_v};
}

AttentionPlan::AttentionPlan(std::shared_ptr<const detail::PlanState> state)
    : state_(std::move(state)) {}

AttentionPlan make_plan(const AttentionShape& shape, const AttentionOptions& options) {
  auto st = std::make_shared<detail::PlanState>();
  st->shape = shape;
  st->options = options;
  st->planned = detail::plan_problem(shape, st->options);
  Resolved resolved = resolve(options.variant, st->planned);
  st->spec = std::move(resolved.spec);
  st->reason = std::make_shared<const std::string>(std::move(resolved.reason));
  st->id = variant_of(st->spec);
  st->impl = &detail::variant_for(st->id);
  st->impl->check(st->planned, st->spec);
  st->cost = st->impl->cost(st->planned, st->spec);
  st->prepared = st->impl->prepare(st->planned, st->spec);
  plan_cache_path(*st);
  // Counted now, so that a plan's first run on its target and path allocates no count.
  for (const bool weights : {false, true}) {
    (void)qkv_variant_bytes(*st, weights, detail::ComputePath::kFp32);
  }
  return AttentionPlan(std::move(st));
}

std::size_t AttentionPlan::workspace_bytes() const {
  return state_->tables_end() + state_->staging_bytes;
}

const AttentionShape& AttentionPlan::shape() const { return state_->shape; }
Variant AttentionPlan::variant() const { return state_->id; }

namespace {

bool all_f32(std::initializer_list<DType> types) {
  return std::all_of(types.begin(), types.end(), [](DType t) { return t == DType::kF32; });
}

// A caller's workspace for a run over a cache: 64-byte aligned and large enough for the
// kernel's scratch and the tables; the staging part is optional (used when present).
void check_workspace(const detail::PlanState& st, std::span<std::byte> workspace) {
  if (workspace.empty()) return;
  detail::check_workspace(workspace, st.tables_end(),
                          "the kernel's scratch and tables of AttentionPlan::workspace_bytes()");
}

// The decode kernel's scratch: the start of the caller's (checked) workspace, or an allocation.
float* cache_workspace(const detail::PlanState& st, std::span<std::byte> workspace,
                       hwy::AlignedFreeUniquePtr<float[]>& owned) {
  if (workspace.empty()) {
    owned = hwy::AllocateAligned<float>(st.cache_workspace_bytes / 4);
    return owned.get();
  }
  return reinterpret_cast<float*>(workspace.data());
}

// Where a paged run gathers its lengths and block tables: after the kernel's scratch in the
// caller's workspace (none without one: the view allocates its own).
std::span<std::int64_t> paged_tables(const detail::PlanState& st, std::span<std::byte> workspace) {
  if (workspace.empty()) return {};
  return {reinterpret_cast<std::int64_t*>(workspace.data() + st.cache_workspace_bytes),
          st.paged_table_bytes / 8};
}

// Where a cache run stages a half q and out in fp32: the end of the caller's workspace (none
// without one, or when it stops short of workspace_bytes(): the staging allocates).
std::span<float> staging_arena(const detail::PlanState& st, std::span<std::byte> workspace) {
  if (workspace.size() < st.tables_end() + st.staging_bytes) return {};
  return {reinterpret_cast<float*>(workspace.data() + st.tables_end()), st.staging_bytes / 4};
}

// Operands are bf16 when each is a bf16 tensor or an f32 one that fp32_precision rounds.
bool bf16_operands(const detail::PlanState& st, std::initializer_list<DType> inputs) {
  const bool rounds = st.options.fp32_precision == Fp32Precision::kBf16;
  return std::all_of(inputs.begin(), inputs.end(),
                     [&](DType t) { return t == DType::kBF16 || (t == DType::kF32 && rounds); });
}

// The path of this run's products, chosen before anything is written (an Error for a forced
// path that cannot run): bf16 operands of a variant on the tile kernel take the bf16 path; the
// rest runs in fp32.
detail::ComputePath path_for(const detail::PlanState& st, bool bf16) {
  if (!bf16 || !detail::row_of(st.id).tile_kernel) return detail::ComputePath::kFp32;
  return detail::bf16_path_for_runs();
}

// A caller's workspace for a run over q, k, v with these dtypes on `path`: the variant's
// scratch (qkv_variant_bytes), then the fp32 copies F32Staging makes, in its order (q, k, v,
// out; each 64-byte aligned): a half view, or an f32 input that fp32_precision rounds. With
// weights the variant's part also holds the weights pass's scratch. Unset (`serves` false)
// where a workspace cannot serve the run: weights from a variant that writes none.
struct QkvWorkspace {
  bool serves = false;
  std::size_t kernel = 0;   // bytes of the variant's part
  std::size_t staging = 0;  // bytes of the copies after it (from round64(kernel))
  std::size_t total() const { return staging == 0 ? kernel : round64(kernel) + staging; }
};

QkvWorkspace qkv_workspace(const detail::PlanState& st, const QkvDtypes& d,
                           detail::ComputePath path) {
  QkvWorkspace w;
  const std::optional<std::size_t> kernel = qkv_variant_bytes(st, d.weights, path);
  if (!kernel) return w;
  w.serves = true;
  w.kernel = *kernel;
  const bool rounds = st.options.fp32_precision == Fp32Precision::kBf16;
  auto copy = [](const std::array<std::int64_t, 4>& n) {
    return round64(4 * static_cast<std::size_t>(n[0] * n[1] * n[2] * n[3]));
  };
  const detail::Problem& p = st.planned;
  if (d.q != DType::kF32 || rounds) w.staging += copy(p.q.shape);
  if (d.k != DType::kF32 || rounds) w.staging += copy(p.k.shape);
  if (d.v != DType::kF32 || rounds) w.staging += copy(p.v.shape);
  if (d.out != DType::kF32) w.staging += copy(p.out.shape);
  return w;
}

void check_qkv_dtypes(const QkvDtypes& d) {
  detail::check_tensor_dtype("q", d.q);
  detail::check_tensor_dtype("k", d.k);
  detail::check_tensor_dtype("v", d.v);
  detail::check_tensor_dtype("out", d.out);
}

// The caller's workspace split for a run over q, k, v, checked before anything is written: the
// variant's part (which the variant checks for the run's target and key lengths; with weights
// checked here, as the weights pass needs it) and where F32Staging puts its copies, on the
// run's compute path.
struct QkvWorkspaceParts {
  std::span<std::byte> kernel;
  std::span<float> staging;
};

QkvWorkspaceParts split_qkv_workspace(const detail::PlanState& st, const QkvDtypes& dtypes,
                                      const RunArgs& args, detail::ComputePath path) {
  if (args.workspace.empty()) return {};
  check_qkv_dtypes(dtypes);
  // Built only to throw: a size of 10 digits no longer fits std::string's inline buffer.
  auto given = [&] { return std::to_string(args.workspace.size()) + " bytes"; };
  if (!qkv_variant_bytes(st, false, path)) {
    throw Error(ErrorKind::kNotImplemented, "workspace",
                "empty for a " + std::string(to_string(st.id)) + " run over q, k and v", given(),
                "this variant allocates its own scratch; a caller workspace serves runs over "
                "q, k, v of the variants whose plans report qkv_workspace_bytes(), and runs "
                "over a KvCache or PagedKvCache");
  }
  QkvDtypes asked = dtypes;
  asked.weights = args.weights.has_value();
  const QkvWorkspace w = qkv_workspace(st, asked, path);
  if (!w.serves) return {args.workspace, {}};  // weights from a variant that writes none: refused
  if (w.staging == 0 && !asked.weights) return {args.workspace, {}};  // the variant checks
  detail::check_workspace(args.workspace, w.total(),
                          "AttentionPlan::qkv_workspace_bytes() for the run's q, k, v and out "
                          "dtypes (with the fp32 copies of half views) and QkvDtypes::weights");
  const std::size_t offset = round64(w.kernel);
  return {args.workspace.first(w.kernel),
          {reinterpret_cast<float*>(args.workspace.data() + offset), w.staging / 4}};
}

RunRecord run_f32(const detail::PlanState& st, const ConstTensor& q, const ConstTensor& k,
                  const ConstTensor& v, const Tensor& out, const RunArgs& args,
                  Clock::time_point start, detail::ComputePath path) {
  detail::Problem p = detail::bind_problem(st.planned, q, k, v, out, args);
  p.compute_path = path;
  p.workspace = args.workspace;  // split by split_qkv_workspace, sized by the kernel
  // The variant's limits on per-call data (key lengths, keep, bias, weights, lse) are known
  // only now.
  const detail::ProblemMask& mask = p.mask;
  if (p.weights || p.lse || !mask.key_lengths.empty() || mask.keep || mask.bias) {
    st.impl->check(p, st.spec);
  }
  // RoPE's tables are built here, on the calling thread, before any thread team: the kernels
  // then only read them (std::bad_alloc inside an OpenMP region would terminate).
  if (const detail::RopeTables* rope = detail::rope_of(p.positional.get())) rope->rows();
  st.prepared->run(p);
  // The planned cost counts every key; the run's key lengths change it. The planned one adds
  // the weights' bytes when they are asked for (the variants that write weights count them
  // so): a recount would build sliding window's band on every run, allocations in a steady
  // loop.
  detail::Cost cost = st.cost;
  if (!mask.key_lengths.empty() && st.impl->cost_counts_key_lengths()) {
    cost = st.impl->cost(p, st.spec);
  } else {
    cost.bytes += detail::weights_bytes(p);
  }
  return record_of(st, cost, p.threads, start, path);
}

}  // namespace

std::optional<std::size_t> AttentionPlan::qkv_workspace_bytes(const QkvDtypes& dtypes) const {
  check_qkv_dtypes(dtypes);
  const detail::PlanState& st = *state_;
  const QkvWorkspace w =
      qkv_workspace(st, dtypes, path_for(st, bf16_operands(st, {dtypes.q, dtypes.k, dtypes.v})));
  if (!w.serves) return std::nullopt;
  return w.total();
}

RunRecord AttentionPlan::run(const AnyConstTensor& q, const AnyConstTensor& k,
                             const AnyConstTensor& v, const AnyTensor& out,
                             const RunArgs& args) const {
  const Clock::time_point start = Clock::now();
  const detail::PlanState& st = *state_;
  if (!args.query_lengths.empty()) {
    throw Error(ErrorKind::kUnsupported, "query_lengths", "empty for a run over q, k and v",
                std::to_string(args.query_lengths.size()) + " lengths",
                "per-sequence query counts are for runs over a KvCache or PagedKvCache");
  }
  const QkvDtypes dtypes{q.dtype, k.dtype, v.dtype, out.dtype};
  const detail::ComputePath path = path_for(st, bf16_operands(st, {q.dtype, k.dtype, v.dtype}));
  const QkvWorkspaceParts parts = split_qkv_workspace(st, dtypes, args, path);
  const bool rounds = st.options.fp32_precision == Fp32Precision::kBf16;
  if (!rounds && all_f32({q.dtype, k.dtype, v.dtype, out.dtype})) {
    return run_f32(st, q.as<float>(), k.as<float>(), v.as<float>(), out.as<float>(), args, start,
                   path);
  }
  detail::F32Staging staging(parts.staging);
  const ConstTensor q32 = staging.input("q", q, st.planned.q.shape, rounds);
  const ConstTensor k32 = staging.input("k", k, st.planned.k.shape, rounds);
  const ConstTensor v32 = staging.input("v", v, st.planned.v.shape, rounds);
  const Tensor out32 = staging.output(out, st.planned.out.shape, args);
  RunArgs kernel_args = args;
  kernel_args.workspace = parts.kernel;
  const RunRecord record = run_f32(st, q32, k32, v32, out32, kernel_args, start, path);
  staging.finish();
  return record;
}

namespace {

// The decode kernel over a checked cache view: q and out staged in fp32 when they are half (or
// q is rounded by fp32_precision); the cache is read in its own dtype.
RunRecord run_over_cache(const detail::PlanState& st, const AnyConstTensor& q, const AnyTensor& out,
                         const RunArgs& args, const detail::PackedKv& kv, Clock::time_point start) {
  // The decode kernel has no bf16 products yet: it widens a half cache exactly (an int8 one
  // computes Q·Kᵀ and P·V in integers: the record says so, detail::cache_compute_path).
  const detail::ComputePath path = detail::ComputePath::kFp32;
  const bool rounds = st.options.fp32_precision == Fp32Precision::kBf16;
  detail::F32Staging staging(staging_arena(st, args.workspace));
  ConstTensor q32 = q.as<float>();
  Tensor out32 = out.as<float>();
  if (rounds || !all_f32({q.dtype, out.dtype})) {
    q32 = staging.input("q", q, st.planned.q.shape, rounds);
    out32 = staging.output(out, st.planned.out.shape, args);
  }
  const detail::ByteRange q_range = detail::bind_view("q", q32, st.planned.q.shape);
  detail::Problem p = st.planned;
  p.q = q32;
  p = detail::bind_outputs(p, out32, args, {{"q", q_range}});
  hwy::AlignedFreeUniquePtr<float[]> owned;
  float* ws = cache_workspace(st, args.workspace, owned);
  const detail::CacheProblem cp = detail::cache_problem(st, p, kv, args.query_lengths);
  detail::cache_attention(cp, ws);
  detail::clear_padding_rows(cp);
  staging.finish();
  RunRecord record = record_of(st, detail::cache_cost(cp), detail::cache_team(cp), start, path);
  record.compute_path = detail::cache_compute_path(kv.dtype);
  record.decode_prefetch = detail::decode_prefetch_name();  // the choice cp was given
  return record;
}

}  // namespace

RunRecord AttentionPlan::run(const AnyConstTensor& q, const KvCache& cache, const AnyTensor& out,
                             const RunArgs& args) const {
  const Clock::time_point start = Clock::now();
  detail::check_cache_run(*state_, cache, args);
  check_workspace(*state_, args.workspace);
  return run_over_cache(*state_, q, out, args, detail::KvCacheAccess::packed(cache), start);
}

RunRecord AttentionPlan::run(const AnyConstTensor& q, const PagedKvCache& cache,
                             std::span<const PagedKvCache::SequenceId> sequences,
                             const AnyTensor& out, const RunArgs& args) const {
  const Clock::time_point start = Clock::now();
  check_workspace(*state_, args.workspace);
  const detail::PagedView view = detail::PagedKvCacheAccess::view(
      cache, sequences, state_->shape.seq_k, paged_tables(*state_, args.workspace));
  detail::check_paged_run(*state_, cache, sequences, view.packed, args);
  return run_over_cache(*state_, q, out, args, view.packed, start);
}

RunRecord attend(const AnyConstTensor& q, const AnyConstTensor& k, const AnyConstTensor& v,
                 const AnyTensor& out, const AttentionOptions& options) {
  const Clock::time_point start = Clock::now();
  const AttentionShape shape = detail::shape_of(q, k, v, out);
  RunRecord record =
      make_plan(shape, detail::plan_options(options)).run(q, k, v, out, detail::run_args(options));
  record.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return record;
}

RunRecord attend(const AnyConstTensor& q, const KvCache& cache, const AnyTensor& out,
                 const AttentionOptions& options) {
  const Clock::time_point start = Clock::now();
  detail::check_view("q", q.data, q.shape, q.strides, dtype_size(q.dtype));
  const AttentionShape shape = cache_shape(cache.shape(), q.shape[1], q.shape[2]);
  RunRecord record =
      make_plan(shape, detail::plan_options(options)).run(q, cache, out, detail::run_args(options));
  record.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return record;
}

}  // namespace seqattn

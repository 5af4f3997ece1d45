// LSH attention's row of the variant table. Auto may choose it, as it may hierarchical
// attention: a policy chooses by length, so a call with what LSH refuses (S_q != S_k, keep
// masks, bias, weights, RoPE, ALiBi, shared QK with GQA) gets the refusal naming the option.
#include "seqattn/error.hpp"
#include "variants/variant_row.hpp"

namespace seqattn::detail {
namespace {

bool shared_of(const ParamReader& params) {
  const std::string& qk = params.text("qk");
  if (qk == "shared") return true;
  if (qk == "separate") return false;
  throw Error(ErrorKind::kInvalidArgument, "lsh.qk", "shared or separate", qk,
              "shared: keys are the normalised queries (Reformer); separate: hash k as keys");
}

void apply(const ParamReader& params, ConcreteSpec& spec) {
  auto& s = std::get<LshSpec>(spec);
  params.read("hashes", s.hashes);
  params.read("buckets", s.buckets);
  params.read("chunk_length", s.chunk_length);
  if (params.has("qk")) s.shared_qk = shared_of(params);
  params.read("seed", s.seed);
}

VariantParams params_of(const ConcreteSpec& spec) {
  const auto& s = std::get<LshSpec>(spec);
  if (s.rotations.given()) {
    throw Error(ErrorKind::kUnsupported, "lsh.rotations",
                "rotations drawn from the seed (parameters have no text for a caller's matrix)",
                "a caller-given matrix");
  }
  return VariantParams{{"hashes", std::to_string(s.hashes)},
                       {"buckets", std::to_string(s.buckets)},
                       {"chunk_length", std::to_string(s.chunk_length)},
                       {"qk", s.shared_qk ? "shared" : "separate"},
                       {"seed", std::to_string(s.seed)}};
}

std::string describe(const ConcreteSpec& spec) {
  const auto& s = std::get<LshSpec>(spec);
  return std::to_string(s.hashes) + " hashes, " +
         (s.buckets == 0 ? std::string("auto") : std::to_string(s.buckets)) + " buckets, chunk " +
         std::to_string(s.chunk_length) + (s.shared_qk ? ", shared QK" : ", separate QK");
}

}  // namespace

const VariantRow& lsh_row() {
  static const VariantRow row{
      .parameters = {{"hashes", "hash rounds (1..64)"},
                     {"buckets", "buckets per round, even (0 = min(128, 2*max(1, S/chunk)))"},
                     {"chunk_length", "sorted slots per chunk"},
                     {"qk", "shared|separate", ParameterKind::kName},
                     {"seed", "random rotations seed", ParameterKind::kUnsigned}},
      .auto_may_choose = true,
      .quadratic = false,
      .tile_kernel = true,
      .apply = apply,
      .params_of = params_of,
      .describe = describe,
  };
  return row;
}

}  // namespace seqattn::detail

// The sliding window's row of the variant table. `window` sets both reaches, so it applies
// before `window_right`.
#include <algorithm>

#include "variants/variant_row.hpp"

namespace seqattn::detail {

const VariantRow& sliding_window_row() {
  static const VariantRow row{
      .parameters = {{"window", "keys on each side of the query (both reaches)"},
                     {"window_right", "keys on the right, after window (0 = causal)"},
                     {"global_tokens", "global token positions, e.g. 0,1",
                      ParameterKind::kIntegers}},
      .auto_may_choose = true,
      .tile_kernel = true,
      .over_cache =
          [](const ConcreteSpec& spec) {
            const auto& w = std::get<SlidingWindowSpec>(spec);
            // A reach past 2^40 is the same as unbounded and keeps pos ± reach from overflowing.
            constexpr std::int64_t kReach = std::int64_t{1} << 40;
            CacheRule rule{true, std::min(w.left, kReach), std::min(w.right, kReach),
                           w.global_tokens};
            std::sort(rule.globals.begin(), rule.globals.end());
            rule.globals.erase(std::unique(rule.globals.begin(), rule.globals.end()),
                               rule.globals.end());
            return rule;
          },
      .apply =
          [](const ParamReader& params, ConcreteSpec& spec) {
            auto& s = std::get<SlidingWindowSpec>(spec);
            if (params.has("window")) s.left = s.right = params.integer("window");
            params.read("window_right", s.right);
            if (params.has("global_tokens")) s.global_tokens = params.integers("global_tokens");
          },
      .params_of =
          [](const ConcreteSpec& spec) {
            const auto& s = std::get<SlidingWindowSpec>(spec);
            VariantParams p{{"window", std::to_string(s.left)},
                            {"window_right", std::to_string(s.right)}};
            if (!s.global_tokens.empty()) p["global_tokens"] = integers_text(s.global_tokens);
            return p;
          },
      .describe =
          [](const ConcreteSpec& spec) {
            const auto& s = std::get<SlidingWindowSpec>(spec);
            std::string text = "window " + std::to_string(s.left) + "+" + std::to_string(s.right);
            if (!s.global_tokens.empty()) {
              text += ", " + std::to_string(s.global_tokens.size()) + " global tokens";
            }
            return text;
          },
  };
  return row;
}

}  // namespace seqattn::detail

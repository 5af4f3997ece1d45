#include "src/cli/report_accuracy.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <variant>

#include "src/cli/catalogue.hpp"

namespace seqattn::cli {
namespace {

bool measured(const std::vector<ReportPoint>& points, const std::string& variant,
              std::int64_t seq) {
  for (const ReportPoint& p : points) {
    if (p.variant == variant && p.seq == seq && p.measured) return true;
  }
  return false;
}

// Every family's points, the uniform ones taken from the sweep.
std::vector<FamilyErrorPoint> with_uniform(const AccuracyReport& a,
                                           const std::vector<ReportPoint>& points) {
  std::vector<FamilyErrorPoint> all;
  for (const ReportPoint& p : points) {
    if (p.relative_error && p.threads == points.front().threads) {
      all.push_back({InputFamily::kUniform, p.seq, p.variant, *p.relative_error, p.error_rows});
    }
  }
  all.insert(all.end(), a.points.begin(), a.points.end());
  return all;
}

constexpr std::int64_t kLshHashes[] = {1, 2, 4, 8};

void lsh_by_hashes(AccuracyReport& a, Workload& w, const SampledReference& dense,
                   const VariantSpec& lsh) {
  for (const std::int64_t hashes : kLshHashes) {
    LshSpec spec = std::get<LshSpec>(lsh);
    spec.hashes = hashes;
    AttentionOptions options;
    options.variant = spec;
    time_attend(w, options, 0, 1);
    const double error = relative_error(pick_rows(w, w.out, dense), dense.out);
    a.lsh_hashes.push_back({w.shape.seq, hashes, error});
    std::fprintf(stderr, "report accuracy S=%-6lld clustered lsh hashes=%lld error %.2e\n",
                 static_cast<long long>(w.shape.seq), static_cast<long long>(hashes), error);
  }
}

void lsh_hashes_markdown(std::ostream& md, const AccuracyReport& a) {
  if (a.lsh_hashes.empty()) return;
  md << "\n### LSH attention on `clustered`, by number of hashes\n\nThe same error (vs exact "
        "dense on the same rows), LSH's other parameters as above; a key seen in several rounds "
        "counts once per round (docs/architecture.md, \"LSH attention\").\n\n| S |";
  for (const std::int64_t h : kLshHashes) md << " " << h << (h == 1 ? " hash |" : " hashes |");
  md << "\n| ---: |";
  for (std::size_t i = 0; i < std::size(kLshHashes); ++i) md << " ---: |";
  std::int64_t seq = -1;
  for (const LshHashesPoint& p : a.lsh_hashes) {
    if (p.seq != seq) md << "\n| " << (seq = p.seq) << " |";
    char text[32];
    std::snprintf(text, sizeof text, " %.2e |", p.error);
    md << text;
  }
  md << "\n";
}

}  // namespace

AccuracyReport run_accuracy(const ReportConfig& c, const std::map<std::string, VariantSpec>& specs,
                            const std::vector<ReportPoint>& points) {
  const auto start = std::chrono::steady_clock::now();
  AccuracyReport a;
  for (const std::int64_t seq : c.seqs) {
    for (const InputFamily family : all_input_families()) {
      if (family == InputFamily::kUniform) continue;
      Shape shape = c.shape;
      shape.seq = seq;
      Workload w(shape);
      fill_inputs(w, family, 7 + static_cast<std::uint64_t>(seq));
      const SampledReference dense = dense_on_rows(w, c.error_rows, 0);
      for (const std::string& variant : c.variants) {
        if (variant == "dense" || !measured(points, variant, seq)) continue;
        AttentionOptions options;
        options.variant = specs.at(variant);
        time_attend(w, options, 0, 1);
        const double error = relative_error(pick_rows(w, w.out, dense), dense.out);
        a.points.push_back({family, seq, variant, error, dense.rows});
        if (variant == "lsh" && family == InputFamily::kClustered)
          lsh_by_hashes(a, w, dense, specs.at(variant));
        char line[160];
        std::snprintf(line, sizeof line, "report accuracy S=%-6lld %-9s %-15s error %.2e",
                      static_cast<long long>(seq), std::string(to_string(family)).c_str(),
                      variant.c_str(), error);
        std::cerr << line << "\n";
      }
    }
  }
  a.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return a;
}

void accuracy_markdown(std::ostream& md, const ReportConfig& c, const AccuracyReport& a,
                       const std::vector<ReportPoint>& points) {
  const std::vector<FamilyErrorPoint> all = with_uniform(a, points);
  md << "\n## Error vs exact dense, by input family\n\nmax |out - dense| / max |dense| over up "
        "to "
     << c.error_rows
     << " evenly spaced query rows (exact dense for those rows), one table per family: "
        "`uniform` (q, k, v uniform in [-1, 1): near-uniform attention), `decaying` (q and k "
        "share a smooth random process and a constant part, RoPE-rotated: attention peaked at "
        "the diagonal over about a dozen tokens, with a tail), `anchors` (decaying plus four "
        "sink tokens, 0-3, that every query attends to), `lowrank` (rank-8 q and k), `clustered` "
        "(q around S/32 random directions with tokens assigned at random, k = q RMS-normalised, "
        "the keys of LSH's shared-QK mode: attention follows content, not distance). Values "
        "stay uniform.\n";
  for (const InputFamily family : all_input_families()) {
    md << "\n### " << to_string(family) << "\n\n";
    approximation_table(md, c.variants, c.seqs, [&](std::int64_t seq, const std::string& v) {
      std::string cell = "-";
      for (const FamilyErrorPoint& p : all) {
        if (p.family != family || p.seq != seq || p.variant != v) continue;
        char text[32];
        std::snprintf(text, sizeof text, "%.2e", p.error);
        cell = text;
      }
      return cell;
    });
  }
  lsh_hashes_markdown(md, a);
  md << "\nThe accuracy pass took " << static_cast<int>(a.elapsed_seconds + 0.5) << " s.\n";
}

nlohmann::json lsh_hashes_json(const AccuracyReport& a) {
  nlohmann::json j = nlohmann::json::array();
  for (const LshHashesPoint& p : a.lsh_hashes)
    j.push_back({{"family", "clustered"},
                 {"seq", p.seq},
                 {"hashes", p.hashes},
                 {"relative_error", p.error}});
  return j;
}

nlohmann::json accuracy_json(const AccuracyReport& a, const std::vector<ReportPoint>& points) {
  nlohmann::json j = nlohmann::json::array();
  for (const FamilyErrorPoint& p : with_uniform(a, points)) {
    j.push_back({{"family", std::string(to_string(p.family))},
                 {"seq", p.seq},
                 {"variant", p.variant},
                 {"relative_error", p.error},
                 {"error_rows", p.rows}});
  }
  return j;
}

}  // namespace seqattn::cli

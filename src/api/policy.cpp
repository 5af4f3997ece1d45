// Variant selection by sequence length, and its JSON profile format.
#include "seqattn/policy.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "seqattn/error.hpp"
#include "seqattn/options.hpp"

namespace seqattn {
namespace {

void check_policy(const SelectionPolicy& p, const std::string& where) {
  if (p.dense_max_seq < 0) {
    throw Error(ErrorKind::kInvalidArgument, where + "dense_max_seq", ">= 0",
                std::to_string(p.dense_max_seq));
  }
  if (p.sparse_max_seq < p.dense_max_seq) {
    throw Error(ErrorKind::kInvalidArgument, where + "sparse_max_seq",
                ">= dense_max_seq = " + std::to_string(p.dense_max_seq),
                std::to_string(p.sparse_max_seq));
  }
  if (p.window < 1) {
    throw Error(ErrorKind::kInvalidArgument, where + "window", ">= 1", std::to_string(p.window));
  }
  if (p.hierarchical_block < 2 || p.hierarchical_block % 2 != 0) {
    throw Error(ErrorKind::kInvalidArgument, where + "hierarchical_block", "an even number >= 2",
                std::to_string(p.hierarchical_block));
  }
  if (p.num_features < 0) {
    throw Error(ErrorKind::kInvalidArgument, where + "num_features", ">= 0",
                std::to_string(p.num_features));
  }
  parse_feature_map(p.feature_map, where + "feature_map");
}

void check_budget(std::optional<double> budget, const std::string& name) {
  if (budget && !(*budget >= 0)) {
    throw Error(ErrorKind::kInvalidArgument, name, "a number >= 0 (or unset)",
                std::to_string(*budget));
  }
}

Selection by_thresholds(const SelectionPolicy& policy, std::int64_t seq_k,
                        const std::string& note) {
  const std::string n = "S_k=" + std::to_string(seq_k);
  const std::string src = " [" + policy.source + "]" + note;
  if (seq_k <= policy.dense_max_seq) {
    return {
        Variant::kDense, n + " <= dense_max_seq=" + std::to_string(policy.dense_max_seq) + src, {}};
  }
  if (seq_k <= policy.sparse_max_seq) {
    return {Variant::kSlidingWindow,
            n + " in (" + std::to_string(policy.dense_max_seq) + ", " +
                std::to_string(policy.sparse_max_seq) + "]" + src,
            {}};
  }
  return {
      Variant::kLinear, n + " > sparse_max_seq=" + std::to_string(policy.sparse_max_seq) + src, {}};
}

std::string describe(const PolicyMeasurement& m) {
  char text[160];
  std::snprintf(text, sizeof text, "%s %.3g ms, error %.2e", m.variant.c_str(), m.seconds * 1e3,
                m.error);
  return text;
}

// The fastest measured candidate within the budget at the calibrated length nearest above.
Selection by_budget(const SelectionPolicy& policy, std::int64_t seq_k, double budget) {
  std::int64_t at = -1, largest = -1;
  for (const PolicyMeasurement& m : policy.measurements) {
    largest = std::max(largest, m.seq);
    if (m.seq >= seq_k && (at < 0 || m.seq < at)) at = m.seq;
  }
  if (at < 0) at = largest;
  Selection s{Variant::kDense, "", {}};
  const PolicyMeasurement* best = nullptr;
  for (const PolicyMeasurement& m : policy.measurements) {
    if (m.seq != at) continue;
    s.candidates.push_back(m);
    if (m.error <= budget && (best == nullptr || m.seconds < best->seconds)) best = &m;
  }
  char head[200];
  std::snprintf(head, sizeof head,
                "S_k=%lld: fastest within max_error=%.3g at calibrated S=%lld on %s inputs: ",
                static_cast<long long>(seq_k), budget, static_cast<long long>(at),
                policy.inputs.c_str());
  s.reason = head;
  if (best == nullptr) {
    s.reason += "none within the budget, dense";
  } else {
    s.variant = parse_variant(best->variant, "policy.measurements.variant");
    s.reason += describe(*best);
  }
  std::string others;
  for (const PolicyMeasurement& m : s.candidates) {
    if (best == nullptr || m.variant != best->variant) {
      others += (others.empty() ? "" : "; ") + describe(m) + (m.error > budget ? " (over)" : "");
    }
  }
  if (!others.empty()) s.reason += " (also " + others + ")";
  s.reason += " [" + policy.source + "]";
  return s;
}

}  // namespace

Selection select_variant(const SelectionPolicy& policy, std::int64_t seq_k,
                         std::optional<double> max_error) {
  check_policy(policy, "policy.");
  check_budget(max_error, "max_error");
  const std::optional<double> budget = max_error ? max_error : policy.max_error;
  if (!budget) return by_thresholds(policy, seq_k, "");
  if (policy.measurements.empty()) {
    return by_thresholds(policy, seq_k, ", no measured errors to apply max_error to");
  }
  return by_budget(policy, seq_k, *budget);
}

namespace {

// calibrate's "measurements" object: {"seqs": [S...], "inputs": family, "variants": {name:
// {"median_ms": [...], "relative_error": [...]}}}, nulls where a point was not measured.
// Only the variants a policy can choose are kept.
void read_measurements(const nlohmann::json& m, const std::string& path, SelectionPolicy& p) {
  const auto bad = [&](const std::string& key, const std::string& expected,
                       const nlohmann::json& got) {
    throw Error(ErrorKind::kInvalidArgument, path + ": measurements." + key, expected, got.dump());
  };
  if (!m.is_object()) bad("", "an object", m);
  if (m.contains("inputs")) {
    if (!m.at("inputs").is_string()) bad("inputs", "a string", m.at("inputs"));
    p.inputs = m.at("inputs").get<std::string>();
  }
  if (!m.contains("seqs") || !m.contains("variants")) return;
  const nlohmann::json& seqs = m.at("seqs");
  if (!seqs.is_array()) bad("seqs", "an array of lengths", seqs);
  for (const auto& seq : seqs) {
    if (!seq.is_number_integer() || seq.get<std::int64_t>() < 1) bad("seqs", "lengths >= 1", seq);
  }
  for (const char* name : {"dense", "sliding-window", "linear", "hierarchical"}) {
    if (!m.at("variants").contains(name)) continue;
    const nlohmann::json& v = m.at("variants").at(name);
    if (!v.contains("median_ms") || !v.contains("relative_error")) continue;  // not built
    const nlohmann::json &ms = v.at("median_ms"), &err = v.at("relative_error");
    const std::string key = std::string("variants.") + name;
    if (!ms.is_array() || ms.size() != seqs.size()) bad(key + ".median_ms", "one per seq", ms);
    if (!err.is_array() || err.size() != seqs.size()) {
      bad(key + ".relative_error", "one per seq", err);
    }
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      if (ms[i].is_null() || err[i].is_null()) continue;
      if (!ms[i].is_number() || !err[i].is_number() || !(err[i].get<double>() >= 0)) {
        bad(key, "numbers (errors >= 0) or null", v);
      }
      p.measurements.push_back(
          {name, seqs[i].get<std::int64_t>(), ms[i].get<double>() * 1e-3, err[i].get<double>()});
    }
  }
}

nlohmann::json measurements_json(const SelectionPolicy& p) {
  std::vector<std::int64_t> seqs;
  for (const PolicyMeasurement& m : p.measurements) {
    if (std::find(seqs.begin(), seqs.end(), m.seq) == seqs.end()) seqs.push_back(m.seq);
  }
  std::sort(seqs.begin(), seqs.end());
  nlohmann::json j = {{"seqs", seqs}, {"inputs", p.inputs}, {"variants", nlohmann::json::object()}};
  for (const PolicyMeasurement& m : p.measurements) {
    nlohmann::json& v = j["variants"][m.variant];
    if (v.is_null()) {
      v["median_ms"] = std::vector<std::nullptr_t>(seqs.size(), nullptr);
      v["relative_error"] = std::vector<std::nullptr_t>(seqs.size(), nullptr);
    }
    const auto at = std::find(seqs.begin(), seqs.end(), m.seq) - seqs.begin();
    v["median_ms"][static_cast<std::size_t>(at)] = m.seconds * 1e3;
    v["relative_error"][static_cast<std::size_t>(at)] = m.error;
  }
  return j;
}

}  // namespace

SelectionPolicy SelectionPolicy::load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(ErrorKind::kIo, "profile", "a readable JSON file",
                "'" + path + "' cannot be opened");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kIo, "profile", "valid JSON", "'" + path + "': " + e.what());
  } catch (const std::exception& e) {  // a read error, e.g. the path is a directory
    throw Error(ErrorKind::kIo, "profile", "a readable JSON file",
                "'" + path + "' cannot be read: " + e.what());
  }
  if (!j.is_object())
    throw Error(ErrorKind::kInvalidArgument, "profile", "a JSON object", j.type_name());
  SelectionPolicy p;
  const nlohmann::json& policy = j.contains("policy") ? j.at("policy") : j;
  auto read_int = [&](const char* key, std::int64_t& field) {
    if (!policy.contains(key)) return;
    if (!policy.at(key).is_number_integer()) {
      throw Error(ErrorKind::kInvalidArgument, path + ": " + key, "an integer",
                  policy.at(key).dump());
    }
    field = policy.at(key).get<std::int64_t>();
  };
  read_int("dense_max_seq", p.dense_max_seq);
  read_int("sparse_max_seq", p.sparse_max_seq);
  read_int("window", p.window);
  read_int("num_features", p.num_features);
  read_int("hierarchical_block", p.hierarchical_block);
  if (policy.contains("feature_map")) {
    if (!policy.at("feature_map").is_string()) {
      throw Error(ErrorKind::kInvalidArgument, path + ": feature_map", "a string",
                  policy.at("feature_map").dump());
    }
    p.feature_map = policy.at("feature_map").get<std::string>();
  }
  if (j.contains("max_error")) {
    if (!j.at("max_error").is_number()) {
      throw Error(ErrorKind::kInvalidArgument, path + ": max_error", "a number",
                  j.at("max_error").dump());
    }
    p.max_error = j.at("max_error").get<double>();
    check_budget(p.max_error, path + ": max_error");
  }
  if (j.contains("measurements")) read_measurements(j.at("measurements"), path, p);
  p.source = "profile " + path;
  check_policy(p, path + ": ");
  return p;
}

void SelectionPolicy::save_json(const std::string& path) const {
  nlohmann::json j = {{"dense_max_seq", dense_max_seq},
                      {"sparse_max_seq", sparse_max_seq},
                      {"window", window},
                      {"feature_map", feature_map},
                      {"num_features", num_features},
                      {"hierarchical_block", hierarchical_block}};
  if (max_error) j["max_error"] = *max_error;
  if (!measurements.empty()) j["measurements"] = measurements_json(*this);
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kIo, "profile", "a writable path", "'" + path + "'");
  out << j.dump(2) << '\n';
}

}  // namespace seqattn

// Variant selection by sequence length, and its JSON profile format.
#include "seqattn/policy.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "seqattn/error.hpp"
#include "seqattn/options.hpp"
#include "seqattn/variant_params.hpp"

namespace seqattn {
namespace {

std::string rule_name(std::size_t i) { return "rules[" + std::to_string(i) + "]"; }

void check_policy(const SelectionPolicy& p, const std::string& where) {
  if (p.rules.empty()) {
    throw Error(ErrorKind::kInvalidArgument, where + "rules", "at least one rule", "none");
  }
  for (std::size_t i = 0; i < p.rules.size(); ++i) {
    const std::optional<std::int64_t>& bound = p.rules[i].max_seq;
    const bool last = i + 1 == p.rules.size();
    if (last && bound) {
      throw Error(ErrorKind::kInvalidArgument, where + rule_name(i) + ".max_seq",
                  "none on the last rule (every longer length needs a decision)",
                  std::to_string(*bound), "drop max_seq from the last rule or add a rule after it");
    }
    if (!last && !bound) {
      throw Error(ErrorKind::kInvalidArgument, where + rule_name(i) + ".max_seq",
                  "a bound on every rule but the last", "unbounded");
    }
    if (bound && *bound < 0) {
      throw Error(ErrorKind::kInvalidArgument, where + rule_name(i) + ".max_seq", ">= 0",
                  std::to_string(*bound));
    }
    if (bound && i > 0 && *bound < *p.rules[i - 1].max_seq) {
      throw Error(ErrorKind::kInvalidArgument, where + rule_name(i) + ".max_seq",
                  ">= the previous rule's " + std::to_string(*p.rules[i - 1].max_seq),
                  std::to_string(*bound));
    }
  }
}

void check_budget(std::optional<double> budget, const std::string& name) {
  if (budget && !(*budget >= 0)) {
    throw Error(ErrorKind::kInvalidArgument, name, "a number >= 0 (or unset)",
                std::to_string(*budget));
  }
}

std::string spec_text(const ConcreteSpec& spec) {
  return std::string(to_string(variant_of(spec))) + " (" + describe(spec) + ")";
}

Selection by_rules(const SelectionPolicy& policy, std::int64_t seq_k, const std::string& note) {
  std::size_t i = 0;
  while (policy.rules[i].max_seq && seq_k > *policy.rules[i].max_seq) ++i;
  const PolicyRule& rule = policy.rules[i];
  std::string reason = "S_k=" + std::to_string(seq_k);
  if (rule.max_seq) reason += " <= " + std::to_string(*rule.max_seq);
  if (i > 0) reason += " > " + std::to_string(*policy.rules[i - 1].max_seq);
  reason += ": rule " + std::to_string(i + 1) + " of " + std::to_string(policy.rules.size()) +
            ", " + spec_text(rule.spec) + " [" + policy.source + "]" + note;
  return {variant_of(rule.spec), rule.spec, reason, {}};
}

std::string describe(const PolicyMeasurement& m) {
  char text[160];
  std::snprintf(text, sizeof text, "%s %.3g ms, error %.2e", m.variant.c_str(), m.seconds * 1e3,
                m.error);
  return text;
}

// What a measurement ran: its spec, else the first rule's for its variant, else the defaults.
ConcreteSpec measured_spec(const SelectionPolicy& policy, const PolicyMeasurement& m) {
  const Variant id = parse_variant(m.variant, "policy.measurements.variant");
  if (m.spec) {
    if (variant_of(*m.spec) != id) {
      throw Error(ErrorKind::kInvalidArgument, "policy.measurements.spec",
                  "a spec of variant '" + m.variant + "'",
                  std::string(to_string(variant_of(*m.spec))));
    }
    return *m.spec;
  }
  for (const PolicyRule& rule : policy.rules) {
    if (variant_of(rule.spec) == id) return rule.spec;
  }
  return make_spec(id, {});
}

// The fastest measured candidate within the budget at the calibrated length nearest above.
Selection by_budget(const SelectionPolicy& policy, std::int64_t seq_k, double budget) {
  std::int64_t at = -1, largest = -1;
  for (const PolicyMeasurement& m : policy.measurements) {
    largest = std::max(largest, m.seq);
    if (m.seq >= seq_k && (at < 0 || m.seq < at)) at = m.seq;
  }
  if (at < 0) at = largest;
  Selection s{Variant::kDense, DenseSpec{}, "", {}};
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
    s.spec = measured_spec(policy, *best);
    s.variant = variant_of(s.spec);
    s.reason += describe(*best) + " with " + seqattn::describe(s.spec);
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

std::vector<PolicyRule> threshold_rules(std::int64_t dense_max_seq, std::int64_t sparse_max_seq,
                                        std::int64_t window) {
  return {{dense_max_seq, DenseSpec{}},
          {sparse_max_seq, SlidingWindowSpec{window, window, {}}},
          {std::nullopt, LinearSpec{}}};
}

std::optional<std::int64_t> SelectionPolicy::max_seq_of(Variant variant) const {
  for (const PolicyRule& rule : rules) {
    if (variant_of(rule.spec) == variant) return rule.max_seq;
  }
  throw Error(ErrorKind::kInvalidArgument, "policy.rules",
              "a rule running " + std::string(to_string(variant)), "none [" + source + "]");
}

void SelectionPolicy::set_max_seq(Variant variant, std::int64_t max_seq) {
  for (PolicyRule& rule : rules) {
    if (variant_of(rule.spec) == variant) {
      rule.max_seq = max_seq;
      return;
    }
  }
  max_seq_of(variant);  // throws, naming the variant
}

Selection select_variant(const SelectionPolicy& policy, std::int64_t seq_k,
                         std::optional<double> max_error) {
  check_policy(policy, "policy.");
  check_budget(max_error, "max_error");
  const std::optional<double> budget = max_error ? max_error : policy.max_error;
  if (!budget) return by_rules(policy, seq_k, "");
  if (policy.measurements.empty()) {
    return by_rules(policy, seq_k, ", no measured errors to apply max_error to");
  }
  return by_budget(policy, seq_k, *budget);
}

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& key, const std::string& expected,
                      const json& got) {
  throw Error(ErrorKind::kInvalidArgument, path + ": " + key, expected, got.dump());
}

// Parameter values as JSON: integers as numbers, everything else as its text.
json params_json(const VariantParams& params) {
  json j = json::object();
  for (const auto& [name, text] : params) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && error == std::errc() && end == text.data() + text.size()) {
      j[name] = value;
    } else {
      j[name] = text;
    }
  }
  return j;
}

VariantParams read_params(const json& j, const std::string& path, const std::string& key) {
  if (!j.is_object()) bad(path, key, "an object of parameter values", j);
  VariantParams params;
  for (const auto& [name, value] : j.items()) {
    if (value.is_string()) {
      params[name] = value.get<std::string>();
    } else if (value.is_number()) {
      params[name] = value.dump();
    } else if (value.is_array()) {
      std::string text;
      for (const json& x : value) {
        if (!x.is_number_integer()) bad(path, key + "." + name, "a list of integers", value);
        if (!text.empty()) text += ',';
        text += x.dump();
      }
      params[name] = text;
    } else {
      bad(path, key + "." + name, "a number, a string or a list of integers", value);
    }
  }
  return params;
}

json spec_json(const ConcreteSpec& spec) {
  return {{"variant", std::string(to_string(variant_of(spec)))},
          {"params", params_json(params_of(spec))}};
}

ConcreteSpec read_spec(const json& j, const std::string& path, const std::string& key) {
  if (!j.is_object() || !j.contains("variant") || !j.at("variant").is_string()) {
    bad(path, key, "an object with \"variant\" (a name) and optional \"params\"", j);
  }
  const Variant v =
      parse_variant(j.at("variant").get<std::string>(), path + ": " + key + ".variant");
  if (v == Variant::kAuto) bad(path, key + ".variant", "a concrete variant", j.at("variant"));
  return make_spec(v, j.contains("params") ? read_params(j.at("params"), path, key + ".params")
                                           : VariantParams{});
}

std::vector<PolicyRule> read_rules(const json& rules, const std::string& path) {
  if (!rules.is_array()) bad(path, "rules", "an array of {max_seq, variant, params}", rules);
  std::vector<PolicyRule> out;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    PolicyRule rule{std::nullopt, read_spec(r, path, rule_name(i))};
    if (r.contains("max_seq") && !r.at("max_seq").is_null()) {
      if (!r.at("max_seq").is_number_integer()) {
        bad(path, rule_name(i) + ".max_seq", "an integer (or absent on the last rule)",
            r.at("max_seq"));
      }
      rule.max_seq = r.at("max_seq").get<std::int64_t>();
    }
    out.push_back(std::move(rule));
  }
  return out;
}

// A profile written before the rules: dense_max_seq, sparse_max_seq, window, feature_map,
// num_features, hierarchical_block. Returns the three rules and the specs its measurements
// were taken with.
std::vector<PolicyRule> read_thresholds(const json& policy, const std::string& path,
                                        std::vector<ConcreteSpec>& measured_specs) {
  auto read_int = [&](const char* key, std::int64_t fallback) {
    if (!policy.contains(key)) return fallback;
    if (!policy.at(key).is_number_integer()) bad(path, key, "an integer", policy.at(key));
    return policy.at(key).get<std::int64_t>();
  };
  const std::int64_t dense_max = read_int("dense_max_seq", 512);
  const std::int64_t sparse_max = read_int("sparse_max_seq", 2048);
  const std::int64_t window = read_int("window", 256);
  if (sparse_max < dense_max) {
    bad(path, "sparse_max_seq", ">= dense_max_seq = " + std::to_string(dense_max),
        json(sparse_max));
  }
  if (window < 1) bad(path, "window", ">= 1", json(window));
  VariantParams linear;
  if (policy.contains("feature_map")) {
    if (!policy.at("feature_map").is_string()) {
      bad(path, "feature_map", "a string", policy.at("feature_map"));
    }
    linear["feature_map"] = policy.at("feature_map").get<std::string>();
  }
  const std::int64_t features = read_int("num_features", 0);
  if (features != 0) linear["features"] = std::to_string(features);
  std::vector<PolicyRule> rules = threshold_rules(dense_max, sparse_max, window);
  rules.back().spec = make_spec(Variant::kLinear, linear);
  measured_specs = {rules[1].spec, rules[2].spec,
                    make_spec(Variant::kHierarchical,
                              {{"block", std::to_string(read_int("hierarchical_block", 64))}})};
  return rules;
}

// calibrate's "measurements" object: {"seqs": [S...], "inputs": family, "variants": {name:
// {"params": {..}, "median_ms": [...], "relative_error": [...]}}}, nulls where a point was not
// measured. Only the variants auto may choose are kept; a variant without "params" (an older
// profile) was measured with the spec of `known` running it, or its defaults.
void read_measurements(const json& m, const std::string& path,
                       const std::vector<ConcreteSpec>& known, SelectionPolicy& p) {
  if (!m.is_object()) bad(path, "measurements", "an object", m);
  if (m.contains("inputs")) {
    if (!m.at("inputs").is_string()) bad(path, "measurements.inputs", "a string", m.at("inputs"));
    p.inputs = m.at("inputs").get<std::string>();
  }
  if (!m.contains("seqs") || !m.contains("variants")) return;
  const json& seqs = m.at("seqs");
  if (!seqs.is_array()) bad(path, "measurements.seqs", "an array of lengths", seqs);
  for (const auto& seq : seqs) {
    if (!seq.is_number_integer() || seq.get<std::int64_t>() < 1) {
      bad(path, "measurements.seqs", "lengths >= 1", seq);
    }
  }
  if (!m.at("variants").is_object()) bad(path, "measurements.variants", "an object", m);
  for (const auto& [name, v] : m.at("variants").items()) {
    const std::string key = "measurements.variants." + name;
    const Variant id = parse_variant(name, path + ": " + key);
    if (!auto_may_choose(id)) continue;
    if (!v.contains("median_ms") || !v.contains("relative_error")) continue;  // not built
    ConcreteSpec spec = make_spec(id, {});
    if (v.contains("params")) {
      spec = make_spec(id, read_params(v.at("params"), path, key + ".params"));
    } else {
      const auto it = std::find_if(known.begin(), known.end(),
                                   [&](const ConcreteSpec& s) { return variant_of(s) == id; });
      if (it != known.end()) spec = *it;
    }
    const json &ms = v.at("median_ms"), &err = v.at("relative_error");
    if (!ms.is_array() || ms.size() != seqs.size())
      bad(path, key + ".median_ms", "one per seq", ms);
    if (!err.is_array() || err.size() != seqs.size()) {
      bad(path, key + ".relative_error", "one per seq", err);
    }
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      if (ms[i].is_null() || err[i].is_null()) continue;
      if (!ms[i].is_number() || !err[i].is_number() || !(err[i].get<double>() >= 0)) {
        bad(path, key, "numbers (errors >= 0) or null", v);
      }
      p.measurements.push_back({name, seqs[i].get<std::int64_t>(), ms[i].get<double>() * 1e-3,
                                err[i].get<double>(), spec});
    }
  }
}

json measurements_json(const SelectionPolicy& p) {
  std::vector<std::int64_t> seqs;
  for (const PolicyMeasurement& m : p.measurements) {
    if (std::find(seqs.begin(), seqs.end(), m.seq) == seqs.end()) seqs.push_back(m.seq);
  }
  std::sort(seqs.begin(), seqs.end());
  json j = {{"seqs", seqs}, {"inputs", p.inputs}, {"variants", json::object()}};
  for (const PolicyMeasurement& m : p.measurements) {
    json& v = j["variants"][m.variant];
    const json params = params_json(params_of(measured_spec(p, m)));
    if (v.is_null()) {
      v["params"] = params;
      v["median_ms"] = std::vector<std::nullptr_t>(seqs.size(), nullptr);
      v["relative_error"] = std::vector<std::nullptr_t>(seqs.size(), nullptr);
    } else if (v["params"] != params) {
      bad("profile", "measurements.variants." + m.variant, "one spec per variant", params);
    }
    const auto at = std::find(seqs.begin(), seqs.end(), m.seq) - seqs.begin();
    v["median_ms"][static_cast<std::size_t>(at)] = m.seconds * 1e3;
    v["relative_error"][static_cast<std::size_t>(at)] = m.error;
  }
  return j;
}

constexpr const char* kThresholdKeys[] = {"dense_max_seq", "sparse_max_seq", "window",
                                          "feature_map",   "num_features",   "hierarchical_block"};

}  // namespace

SelectionPolicy SelectionPolicy::load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(ErrorKind::kIo, "profile", "a readable JSON file",
                "'" + path + "' cannot be opened");
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kIo, "profile", "valid JSON", "'" + path + "': " + e.what());
  } catch (const std::exception& e) {  // a read error, e.g. the path is a directory
    throw Error(ErrorKind::kIo, "profile", "a readable JSON file",
                "'" + path + "' cannot be read: " + e.what());
  }
  if (!j.is_object())
    throw Error(ErrorKind::kInvalidArgument, "profile", "a JSON object", j.type_name());
  SelectionPolicy p;
  const json& policy = j.contains("policy") ? j.at("policy") : j;
  std::vector<ConcreteSpec> measured_specs;
  if (policy.contains("rules")) {
    for (const char* key : kThresholdKeys) {
      if (policy.contains(key)) {
        bad(path, key, "no threshold keys next to \"rules\" (the rules replace them)",
            policy.at(key));
      }
    }
    p.rules = read_rules(policy.at("rules"), path);
    for (const PolicyRule& rule : p.rules) measured_specs.push_back(rule.spec);
  } else {
    p.rules = read_thresholds(policy, path, measured_specs);
  }
  if (j.contains("max_error")) {
    if (!j.at("max_error").is_number()) bad(path, "max_error", "a number", j.at("max_error"));
    p.max_error = j.at("max_error").get<double>();
    check_budget(p.max_error, path + ": max_error");
  }
  if (j.contains("measurements")) read_measurements(j.at("measurements"), path, measured_specs, p);
  p.source = "profile " + path;
  check_policy(p, path + ": ");
  return p;
}

std::string SelectionPolicy::to_json() const {
  check_policy(*this, "policy.");
  json rules_json = json::array();
  for (const PolicyRule& rule : rules) {
    json r = spec_json(rule.spec);
    if (rule.max_seq) r["max_seq"] = *rule.max_seq;
    rules_json.push_back(r);
  }
  json j = {{"rules", rules_json}};
  if (max_error) j["max_error"] = *max_error;
  if (!measurements.empty()) j["measurements"] = measurements_json(*this);
  return j.dump(2) + "\n";
}

void SelectionPolicy::save_json(const std::string& path) const {
  const std::string text = to_json();
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kIo, "profile", "a writable path", "'" + path + "'");
  out << text;
}

}  // namespace seqattn

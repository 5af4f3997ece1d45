// Variant selection by sequence length, and its JSON profile format.
#include "seqattn/policy.hpp"

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
  if (p.num_features < 0) {
    throw Error(ErrorKind::kInvalidArgument, where + "num_features", ">= 0",
                std::to_string(p.num_features));
  }
  parse_feature_map(p.feature_map, where + "feature_map");
}

}  // namespace

Selection select_variant(const SelectionPolicy& policy, std::int64_t seq_k) {
  check_policy(policy, "policy.");
  const std::string n = "S_k=" + std::to_string(seq_k);
  const std::string src = " [" + policy.source + "]";
  if (seq_k <= policy.dense_max_seq) {
    return {Variant::kDense, n + " <= dense_max_seq=" + std::to_string(policy.dense_max_seq) + src};
  }
  if (seq_k <= policy.sparse_max_seq) {
    return {Variant::kSlidingWindow, n + " in (" + std::to_string(policy.dense_max_seq) + ", " +
                                         std::to_string(policy.sparse_max_seq) + "]" + src};
  }
  return {Variant::kLinear, n + " > sparse_max_seq=" + std::to_string(policy.sparse_max_seq) + src};
}

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
  if (policy.contains("feature_map")) {
    if (!policy.at("feature_map").is_string()) {
      throw Error(ErrorKind::kInvalidArgument, path + ": feature_map", "a string",
                  policy.at("feature_map").dump());
    }
    p.feature_map = policy.at("feature_map").get<std::string>();
  }
  p.source = "profile " + path;
  check_policy(p, path + ": ");
  return p;
}

void SelectionPolicy::save_json(const std::string& path) const {
  nlohmann::json j = {{"dense_max_seq", dense_max_seq},
                      {"sparse_max_seq", sparse_max_seq},
                      {"window", window},
                      {"feature_map", feature_map},
                      {"num_features", num_features}};
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kIo, "profile", "a writable path", "'" + path + "'");
  out << j.dump(2) << '\n';
}

}  // namespace seqattn

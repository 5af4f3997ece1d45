#include "seqattn/error.hpp"

#include <string>

namespace seqattn {
namespace {

const char* kind_text(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kUnsupported:
      return "unsupported option";
    case ErrorKind::kNotImplemented:
      return "not implemented yet";
    case ErrorKind::kIo:
      return "I/O error";
  }
  return "error";
}

std::string compose(ErrorKind kind, const std::string& argument, const std::string& expected,
                    const std::string& actual, const std::string& hint) {
  std::string m = "seqattn: ";
  m += kind_text(kind);
  m += " '" + argument + "': expected " + expected + ", got " + actual;
  if (!hint.empty()) m += " (" + hint + ")";
  return m;
}

}  // namespace

Error::Error(ErrorKind kind, std::string argument, std::string expected, std::string actual,
             std::string hint)
    : std::invalid_argument(compose(kind, argument, expected, actual, hint)),
      kind_(kind),
      argument_(std::move(argument)),
      expected_(std::move(expected)),
      actual_(std::move(actual)) {}

}  // namespace seqattn

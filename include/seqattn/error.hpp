// seqattn::Error: the one exception type the library throws for bad input,
// unsupported option combinations and I/O failures.
#pragma once

#include <stdexcept>
#include <string>

namespace seqattn {

enum class ErrorKind {
  kInvalidArgument,  // a shape, stride, pointer or value is wrong: fix the call
  kUnsupported,      // the chosen variant cannot honour an option: pick another variant
  kNotImplemented,   // declared in the interface but not built yet
  kIo,               // a file could not be read or written
};

// Every message names the argument, what was expected and what was given, so
// that a caller can fix the call from the message alone. The fields are kept
// separately for programmatic inspection.
class Error : public std::invalid_argument {
 public:
  Error(ErrorKind kind, std::string argument, std::string expected, std::string actual,
        std::string hint = {});

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& argument() const noexcept { return argument_; }
  const std::string& expected() const noexcept { return expected_; }
  const std::string& actual() const noexcept { return actual_; }

 private:
  ErrorKind kind_;
  std::string argument_;
  std::string expected_;
  std::string actual_;
};

}  // namespace seqattn

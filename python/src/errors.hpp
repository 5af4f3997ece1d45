// Errors the bindings raise themselves, for a Python argument of the wrong type or value that
// never reaches the library. Like seqattn::Error they keep the argument, what was expected and
// what was given; module.cpp turns both into the seqattn.Error classes (python/seqattn/_errors.py).
#pragma once

#include <exception>
#include <string>

namespace seqattn::python {

class BindingError : public std::exception {
 public:
  BindingError(bool wrong_type, std::string argument, std::string expected, std::string actual,
               std::string message = {})
      : wrong_type_(wrong_type),
        argument_(std::move(argument)),
        expected_(std::move(expected)),
        actual_(std::move(actual)),
        message_(message.empty() ? argument_ + ": expected " + expected_ + ", got " + actual_
                                 : std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  bool wrong_type() const { return wrong_type_; }  // TypeError rather than ValueError
  const std::string& argument() const { return argument_; }
  const std::string& expected() const { return expected_; }
  const std::string& actual() const { return actual_; }

 private:
  bool wrong_type_;
  std::string argument_, expected_, actual_, message_;
};

// seqattn.ArgumentTypeError (a TypeError): "argument: expected …, got …".
[[noreturn]] inline void type_fail(const std::string& argument, const std::string& expected,
                                   const std::string& actual) {
  throw BindingError(true, argument, expected, actual);
}

// seqattn.InvalidArgumentError (a ValueError): "argument: expected …, got …".
[[noreturn]] inline void value_fail(const std::string& argument, const std::string& expected,
                                    const std::string& actual) {
  throw BindingError(false, argument, expected, actual);
}

}  // namespace seqattn::python

// Error values returned across file, network and driver boundaries, and the one fatal
// exception that main() catches.
#pragma once

#include <expected>
#include <stdexcept>
#include <string>
#include <utility>

namespace kvprof {

// What went wrong, which decides the exit code: usage and input errors exit 2, a run that
// finished with some failed requests 3, a check whose answer is no 4, an interrupted one 130, the
// rest 1.
enum class ErrorKind {
  usage,      // a wrong flag or an impossible setting
  input,      // a malformed or unsupported file or value given by the user
  not_found,  // a named thing (model, GPU, file) does not exist
  io,         // reading or writing a file failed
  network,    // a server could not be reached or answered badly
  driver,     // NVML or /proc failed
  interrupted,
  partial,  // the work finished, but part of it failed (e.g. some requests ended in errors)
  // The command answered, and the answer is no: a plan that does not fit (estimate), a
  // measurement outside its expected band (validate); for scripts that gate on it.
  check_failed,
  internal,
};

struct Error {
  ErrorKind kind = ErrorKind::internal;
  std::string message;  // one line, meant for the user

  // Returns a copy whose message is prefixed with `context: `.
  [[nodiscard]] Error with_context(const std::string& context) const {
    return Error{kind, context + ": " + message};
  }
};

template <class T>
using Expected = std::expected<T, Error>;

// Returns an unexpected Error of `kind` with `message`.
inline std::unexpected<Error> fail(ErrorKind kind, std::string message) {
  return std::unexpected(Error{kind, std::move(message)});
}

// The exit code for an error kind: 2 for usage/input/not_found, 3 for partial, 4 for
// check_failed, 130 for interrupted, 1 otherwise.
inline int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage:
    case ErrorKind::input:
    case ErrorKind::not_found:
      return 2;
    case ErrorKind::partial:
      return 3;
    case ErrorKind::check_failed:
      return 4;
    case ErrorKind::interrupted:
      return 130;
    default:
      return 1;
  }
}

// Thrown once, for an error that ends the command; caught in cli::run().
class Fatal : public std::runtime_error {
 public:
  explicit Fatal(Error error) : std::runtime_error(error.message), m_error(std::move(error)) {}
  [[nodiscard]] const Error& error() const { return m_error; }

 private:
  Error m_error;
};

// Returns the value of `result`, or throws Fatal with its error.
template <class T>
T value_or_fatal(Expected<T> result) {
  if (!result) throw Fatal(std::move(result.error()));
  return std::move(*result);
}

// Throws Fatal with the error of `result`, if any.
inline void value_or_fatal(Expected<void> result) {
  if (!result) throw Fatal(std::move(result.error()));
}

}  // namespace kvprof

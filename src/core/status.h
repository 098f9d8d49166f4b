// Errors are values. A Status says whether something worked and, if not, whose fault it was
// (the user's input, or a bug in opfuse) and a message naming the culprit: file, node, input,
// shape. User input never reaches an assert; it comes back as a user error.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace opfuse {

// Concatenates anything streamable into one string: str_cat("node ", name, " has ", n, " inputs").
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

enum class ErrorKind {
  kUser,      // bad model, bad input, bad option: exit code 1
  kInternal,  // a bug in opfuse: exit code 2
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  static Status ok() { return Status(); }
  static Status user_error(std::string message) { return Status(ErrorKind::kUser, std::move(message)); }
  static Status internal_error(std::string message) {
    return Status(ErrorKind::kInternal, std::move(message));
  }

  bool is_ok() const { return !error_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  ErrorKind kind() const { return error_ ? error_->kind : ErrorKind::kUser; }
  const std::string& message() const {
    static const std::string kEmpty;
    return error_ ? error_->message : kEmpty;
  }

  // Adds context in front of the message: "while loading model.onnx: " + inner message.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(error_->kind, context + ": " + error_->message);
  }

 private:
  struct Error {
    ErrorKind kind;
    std::string message;
  };
  Status(ErrorKind kind, std::string message) : error_(Error{kind, std::move(message)}) {}
  std::optional<Error> error_;
};

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {  // NOLINT
    if (std::get<Status>(state_).is_ok()) {
      state_ = Status::internal_error("Result constructed from an ok Status without a value");
    }
  }

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace opfuse

#define OPFUSE_CONCAT_INNER_(a, b) a##b
#define OPFUSE_CONCAT_(a, b) OPFUSE_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` failed.
#define OPFUSE_TRY(expr)                                   \
  do {                                                     \
    ::opfuse::Status opfuse_status_ = (expr);              \
    if (!opfuse_status_.is_ok()) return opfuse_status_;    \
  } while (0)

// `OPFUSE_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result or returns its Status.
#define OPFUSE_ASSIGN_OR_RETURN(lhs, expr) \
  OPFUSE_ASSIGN_OR_RETURN_IMPL_(OPFUSE_CONCAT_(opfuse_result_, __LINE__), lhs, expr)
#define OPFUSE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.is_ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

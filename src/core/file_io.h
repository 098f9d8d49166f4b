// Reading a file, and writing files the user asked for without ever losing one they did not: an existing file is
// replaced only with `overwrite`, and the bytes go to a temporary file in the same directory that
// is renamed into place, so a crash or a full disk never leaves a half-written file behind.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace opfuse {

// User error when `path` exists and !overwrite ("'out.svg' exists; pass --force to overwrite it"),
// or when the directory is missing or not writable.
Status write_file_atomically(const std::string& path, std::string_view bytes, bool overwrite);

// The same check on its own, for commands that want to fail before doing expensive work.
Status check_can_write(const std::string& path, bool overwrite);

// A whole file's bytes; a user error "cannot read <what> '<path>'" when it cannot be opened.
Result<std::string> read_file(const std::string& path, std::string_view what);

}  // namespace opfuse

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

// A file held open for reading: its bytes stay readable through it after its path is deleted or
// names another file.
class OpenFile {
 public:
  // A user error "cannot read <what> '<path>'" when it cannot be opened.
  static Result<OpenFile> open(const std::string& path, std::string_view what);
  OpenFile(OpenFile&& other) noexcept;
  OpenFile& operator=(OpenFile&& other) noexcept;
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  ~OpenFile();

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  OpenFile() = default;
  std::string path_;
  int fd_ = -1;
};

// A whole file mapped read-only: its bytes straight from the page cache, without the zero fill
// and the copy of reading it into a buffer (a 440 MB model: two passes over its bytes saved).
// The mapping lives as long as the object; an empty file is an empty view.
class MappedFile {
 public:
  // A user error "cannot read <what> '<path>'" when it cannot be opened or mapped.
  static Result<MappedFile> open(const std::string& path, std::string_view what);
  // The file's bytes as they are now.
  static Result<MappedFile> map(const OpenFile& file, std::string_view what);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  // Drops the pages wholly before byte `end` from memory (touched again, they are read again
  // from the file): a reader done with them keeps the file from being resident all at once.
  void drop_pages_before(size_t end) const;

 private:
  MappedFile() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace opfuse

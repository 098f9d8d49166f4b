#include "core/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace opfuse {

namespace fs = std::filesystem;

Result<std::string> read_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::user_error(str_cat("cannot read ", what, " '", path, "'"));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

Result<OpenFile> OpenFile::open(const std::string& path, std::string_view what) {
  OpenFile file;
  file.path_ = path;
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd_ < 0) return Status::user_error(str_cat("cannot read ", what, " '", path, "': open: ", std::strerror(errno)));
  return file;
}

OpenFile::OpenFile(OpenFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

OpenFile& OpenFile::operator=(OpenFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<MappedFile> MappedFile::open(const std::string& path, std::string_view what) {
  OPFUSE_ASSIGN_OR_RETURN(OpenFile file, OpenFile::open(path, what));
  return map(file, what);  // the mapping keeps the file once the descriptor closes
}

Result<MappedFile> MappedFile::map(const OpenFile& file, std::string_view what) {
  auto failed = [&](const char* step) {
    return Status::user_error(str_cat("cannot read ", what, " '", file.path(), "': ", step, ": ", std::strerror(errno)));
  };
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) return failed("stat");
  MappedFile mapped;
  mapped.size_ = static_cast<size_t>(st.st_size);
  if (mapped.size_ > 0) {
    void* data = ::mmap(nullptr, mapped.size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    if (data == MAP_FAILED) return failed("mmap");
    mapped.data_ = data;
    ::madvise(data, mapped.size_, MADV_SEQUENTIAL);  // read once, front to back
  }
  return mapped;
}

void MappedFile::drop_pages_before(size_t end) const {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = std::min(end, size_) / page * page;
  if (bytes > 0) ::madvise(data_, bytes, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

Status check_can_write(const std::string& path, bool overwrite) {
  std::error_code ec;
  if (fs::exists(path, ec) && !overwrite) {
    return Status::user_error(str_cat("'", path, "' exists; pass --force to overwrite it"));
  }
  if (fs::is_directory(path, ec)) return Status::user_error(str_cat("'", path, "' is a directory"));
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return Status::user_error(str_cat("cannot write '", path, "': directory '", parent.string(),
                                      "' does not exist"));
  }
  return Status::ok();
}

Status write_file_atomically(const std::string& path, std::string_view bytes, bool overwrite) {
  OPFUSE_TRY(check_can_write(path, overwrite));
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string tmpl = (dir / str_cat(".", target.filename().string(), ".tmp.XXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0) {
    return Status::user_error(str_cat("cannot write '", path, "': ", std::strerror(errno)));
  }
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmpl.c_str());
      return Status::user_error(str_cat("cannot write '", path, "': ", why));
    }
    written += static_cast<size_t>(n);
  }
  // mkstemp creates 0600; give the file the permissions a plain create gets under the usual umask
  // (reading the umask would mean changing it, which races with other threads).
  ::fchmod(fd, 0644);
  if (::close(fd) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    return Status::user_error(str_cat("cannot write '", path, "': ", why));
  }
  // Without `overwrite`, link() refuses atomically if the file appeared since the check above;
  // rename() would silently replace it.
  int moved = overwrite ? std::rename(tmpl.c_str(), path.c_str()) : ::link(tmpl.c_str(), path.c_str());
  int move_errno = errno;
  if (!overwrite || moved != 0) ::unlink(tmpl.c_str());
  if (moved != 0) {
    if (move_errno == EEXIST) {
      return Status::user_error(str_cat("'", path, "' exists; pass --force to overwrite it"));
    }
    return Status::user_error(str_cat("cannot write '", path, "': ", std::strerror(move_errno)));
  }
  return Status::ok();
}

}  // namespace opfuse

#pragma once
// A descriptor that closes itself: the sockets the probes open for one exchange.

#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace rdmakit {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  // The descriptor a call such as socket() returned; throws std::system_error naming `call`
  // with errno when it failed.
  static FileDescriptor checked(int fd, const char* call) {
    if (fd < 0) throw std::system_error(errno, std::generic_category(), call);
    return FileDescriptor(fd);
  }
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Hands the descriptor to whatever closes it from now on (a library that takes it over).
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace rdmakit

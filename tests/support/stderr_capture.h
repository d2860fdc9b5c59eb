// Test helper: everything the process writes to standard error (fd 2) while it lives, into a
// temporary file, returned by Stop. For tests of what Sluice logs. Not thread-safe.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace sluice::testing {

class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    fd_ = mkstemp(path_);
    saved_ = dup(STDERR_FILENO);
    dup2(fd_, STDERR_FILENO);
  }
  ~StderrCapture() { Stop(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Restores standard error and returns what was written to it; later calls return the same.
  std::string Stop() {
    if (fd_ < 0) {
      return text_;
    }
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    lseek(fd_, 0, SEEK_SET);
    char buffer[4096];
    for (ssize_t n; (n = read(fd_, buffer, sizeof(buffer))) > 0;) {
      text_.append(buffer, static_cast<size_t>(n));
    }
    close(fd_);
    unlink(path_);
    fd_ = -1;
    return text_;
  }

 private:
  char path_[40] = "/tmp/sluice_stderr_XXXXXX";
  int fd_ = -1;
  int saved_ = -1;
  std::string text_;
};

}  // namespace sluice::testing

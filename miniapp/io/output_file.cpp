// Atomic output files: exclusive creation of a random temporary beside the target, checked
// writes, fsync and close, and a no-replace rename; the temporary never outlives a failure.
#include "miniapp/io/output_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <streambuf>
#include <vector>

#include "miniapp/io/temp_registry.hpp"

namespace minipipe::io {

namespace {

std::string os_reason(int err) {
  return std::string(std::strerror(err));
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Six characters of [A-Za-z0-9] from the kernel's generator (the clock and a counter where
// getrandom is unavailable: uniqueness comes from O_EXCL anyway, randomness only avoids retries).
std::string random_tag() {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[6] = {};
  if (::getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bytes)) {
    static unsigned counter = 0;
    const auto t = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
    unsigned long long x = t ^ (static_cast<unsigned long long>(::getpid()) << 32) ^ ++counter;
    for (auto& b : bytes) b = static_cast<unsigned char>(x >> 8), x = x * 6364136223846793005ull + 1;
  }
  std::string s(6, 'A');
  for (int i = 0; i < 6; ++i) s[i] = alphabet[bytes[i] % 62];
  return s;
}

// Makes the rename durable: fsync of the directory. File systems that cannot sync a directory
// (EINVAL) are fine; the rename itself has already happened, so this is best effort.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// A stream buffer over OutputFile::write that remembers the first failure instead of throwing
// through std::ostream (which would swallow the exception and only set badbit).
class OutputBuf : public std::streambuf {
 public:
  explicit OutputBuf(OutputFile& f) : file_(f), buf_(1 << 16) { setp(buf_.data(), buf_.data() + buf_.size()); }
  const std::string& error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    if (!error_.empty()) return false;
    const std::size_t n = static_cast<std::size_t>(pptr() - pbase());
    try {
      if (n > 0) file_.write(pbase(), n);
    } catch (const std::exception& e) {
      error_ = e.what();
      return false;
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return true;
  }
  OutputFile& file_;
  std::vector<char> buf_;
  std::string error_;
};

}  // namespace

OutputFile::OutputFile(const std::string& target, bool force) : target_(target), force_(force) {
  if (target.empty()) throw OutputError("output path is empty");
  if (target.back() == '/') throw OutputError("cannot write " + target + ": the path names a directory, not a file");
  // 0666 & ~umask, as for any file the user creates; O_NOFOLLOW + O_EXCL: an existing name (a
  // planted symlink included) is never opened.
  for (int attempt = 0; attempt < 64 && fd_ < 0; ++attempt) {
    const std::string name = target + ".tmp." + random_tag();
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fd_ = fd;
      temp_ = name;
    } else if (errno != EEXIST) {
      throw OutputError("cannot write " + target + ": cannot create a temporary file in " + dir_of(target) + " (" +
                        os_reason(errno) + ")");
    }
  }
  if (fd_ < 0)
    throw OutputError("cannot write " + target + ": 64 random temporary names in " + dir_of(target) +
                      " all exist already");
  slot_ = register_temporary(temp_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    discard();
    throw OutputError("cannot write " + target + ": fstat of " + temp_ + " failed (" + os_reason(err) + ")");
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
}

OutputFile::~OutputFile() {
  if (!committed_) discard();
}

void OutputFile::write(const void* data, std::size_t n) {
  if (fd_ < 0) throw OutputError("cannot write " + target_ + ": the temporary " + temp_ + " is already closed");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw OutputError("cannot write " + target_ + ": write to " + temp_ + " failed (" + os_reason(errno) + ")");
    }
    if (w == 0) throw OutputError("cannot write " + target_ + ": write to " + temp_ + " wrote nothing");
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void OutputFile::close_descriptor() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    throw OutputError("cannot write " + target_ + ": close of " + temp_ + " failed (" + os_reason(errno) + ")");
}

void OutputFile::commit() {
  if (committed_) return;
  try {
    if (removed_) throw OutputError("cannot write " + target_ + ": its temporary was already removed");
    if (fd_ < 0) {
      fd_ = ::open(temp_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd_ < 0)
        throw OutputError("cannot write " + target_ + ": cannot reopen " + temp_ + " (" + os_reason(errno) + ")");
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_)
      throw OutputError("cannot write " + target_ + ": the temporary " + temp_ +
                        " was replaced by another file while it was written");
    if (::fsync(fd_) != 0)
      throw OutputError("cannot write " + target_ + ": fsync of " + temp_ + " failed (" + os_reason(errno) + ")");
    close_descriptor();
    // The name must still be the inode we wrote (nobody swapped in a symlink or another file).
    struct stat lst {};
    if (::lstat(temp_.c_str(), &lst) != 0 || lst.st_dev != dev_ || lst.st_ino != ino_)
      throw OutputError("cannot write " + target_ + ": the temporary " + temp_ +
                        " was replaced by another file while it was written");
    rename_into_place(temp_, target_, force_);
  } catch (...) {
    discard();
    throw;
  }
  committed_ = true;
  unregister_temporary(slot_);
  slot_ = -1;
  sync_directory(dir_of(target_));
}

void OutputFile::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!removed_ && !temp_.empty()) {
    // Only the file we created: a name that now points elsewhere is left alone.
    struct stat lst {};
    if (::lstat(temp_.c_str(), &lst) == 0 && lst.st_dev == dev_ && lst.st_ino == ino_) ::unlink(temp_.c_str());
    removed_ = true;
  }
  unregister_temporary(slot_);
  slot_ = -1;
}

void rename_into_place(const std::string& temp, const std::string& target, bool force) {
  auto refuse = [&] {
    throw OutputError("refusing to overwrite " + target + " (it appeared while it was written); pass --force");
  };
  if (force) {
    if (std::rename(temp.c_str(), target.c_str()) != 0)
      throw OutputError("cannot rename " + temp + " to " + target + " (" + os_reason(errno) + ")");
    return;
  }
  if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno == EEXIST) refuse();
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    throw OutputError("cannot rename " + temp + " to " + target + " (" + os_reason(errno) + ")");
  // No RENAME_NOREPLACE on this file system: link(2) also fails when the target exists.
  if (::link(temp.c_str(), target.c_str()) == 0) {
    ::unlink(temp.c_str());
    return;
  }
  if (errno == EEXIST) refuse();
  throw OutputError("cannot rename " + temp + " to " + target + " (" + os_reason(errno) + ")");
}

void write_output_file(const std::string& path, bool force, const std::function<void(std::ostream&)>& body) {
  OutputFile file(path, force);
  OutputBuf buf(file);
  std::ostream os(&buf);
  body(os);
  os.flush();
  if (!buf.error().empty()) throw OutputError(buf.error());
  if (!os) throw OutputError("cannot write " + path + ": the stream reported a formatting or write failure");
  file.commit();
}

}  // namespace minipipe::io

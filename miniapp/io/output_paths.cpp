// Checks of input and output paths before anything runs: file kinds, length limits (pathconf,
// MPI-IO) and identity of files (device + inode, or the canonical path) between all of them.
#include "miniapp/io/output_paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "miniapp/io/message_text.hpp"
#include "miniapp/io/output_file.hpp"

namespace minipipe::io {

namespace {

namespace fs = std::filesystem;

std::string named(const std::string& key, const std::string& path) {
  return "key '" + key + "' has value " + quoted_text(path);
}

// How to allow an overwrite: a tool's own option (`--csv`, `--output`, ...) takes the tool's
// --force; a deck key (`output.dump`) takes --force or the key output.force.
std::string force_hint(const std::string& key) {
  return key.rfind("--", 0) == 0 ? "without --force" : "without --force (output.force = true)";
}

// A path with a NUL byte (possible in a deck's TOML string, "\u0000") would reach the system
// and HDF5 cut at the NUL, under another name than the one checked.
void refuse_nul(const std::string& key, const std::string& path) {
  if (path.find('\0') != std::string::npos)
    throw PathError(named(key, path) + ", which holds a NUL byte at offset " + std::to_string(path.find('\0')) +
                    "; allowed: a path without NUL bytes");
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// pathconf of `dir`, or `fallback` where the file system gives no limit (-1).
long limit_of(const std::string& dir, int name, long fallback) {
  errno = 0;
  const long v = ::pathconf(dir.c_str(), name);
  return v > 0 ? v : fallback;
}

// What identifies a file: device + inode when it exists, the canonical path in any case.
struct Identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string canonical;
};

Identity identify(const std::string& path) {
  Identity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  std::error_code ec;
  fs::path c = fs::weakly_canonical(fs::absolute(path, ec), ec);
  id.canonical = (ec ? fs::absolute(path) : c).lexically_normal().string();
  return id;
}

bool same_file(const Identity& a, const Identity& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.canonical == b.canonical;
}

void check_output(const OutputSpec& o) {
  const std::string& path = o.path;
  refuse_nul(o.key, path);
  if (path.back() == '/')
    throw PathError(named(o.key, path) + ", which names a directory; allowed: a file name (e.g. out/run.h5)");
  const std::string dir = dir_of(path);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0)
    throw PathError(named(o.key, path) + ": directory " + quoted_text(dir) +
                    (errno == ENOENT ? std::string(" does not exist")
                                     : " is not accessible (" + std::string(std::strerror(errno)) + ")") +
                    "; allowed: a file in an existing, writable directory");
  if (!S_ISDIR(dst.st_mode)) throw PathError(named(o.key, path) + ": " + quoted_text(dir) + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw PathError(named(o.key, path) + ": directory " + quoted_text(dir) + " is not writable (" +
                    std::strerror(errno) + ")");

  const std::size_t temp_len = path.size() + kTempSuffixLength;
  const std::size_t temp_base = base_of(path).size() + kTempSuffixLength;
  const long name_max = limit_of(dir, _PC_NAME_MAX, NAME_MAX);
  const long path_max = limit_of(dir, _PC_PATH_MAX, PATH_MAX);
  if (static_cast<long>(temp_base) > name_max)
    throw PathError(named(o.key, path) + ": its file name is " + std::to_string(base_of(path).size()) +
                    " bytes; allowed: at most " + std::to_string(name_max - static_cast<long>(kTempSuffixLength)) +
                    " (NAME_MAX " + std::to_string(name_max) + " of " + quoted_text(dir) + " less " +
                    std::to_string(kTempSuffixLength) + " for the temporary's suffix)");
  if (static_cast<long>(temp_len) >= path_max)
    throw PathError(named(o.key, path) + ": the path is " + std::to_string(path.size()) + " bytes; allowed: at most " +
                    std::to_string(path_max - 1 - static_cast<long>(kTempSuffixLength)) + " (PATH_MAX " +
                    std::to_string(path_max) + " less the temporary's suffix)");
  if (o.mpi_io && temp_len > kMpiIoNameMax)
    throw PathError(named(o.key, path) + ": the path is " + std::to_string(path.size()) + " bytes; allowed: at most " +
                    std::to_string(kMpiIoNameMax - kTempSuffixLength) +
                    " for a file written through MPI-IO (OpenMPI aborts on longer names); use a shorter or "
                    "relative path");

  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  const int stat_errno = errno;
  struct stat lst {};
  if (!exists && !o.force && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    // A dangling (or looping) symlink: the name is taken, so the final no-replace rename would
    // refuse it after the whole run; say so now.
    char target[PATH_MAX + 1] = {};
    const ssize_t n = ::readlink(path.c_str(), target, PATH_MAX);
    throw PathError(named(o.key, path) + ", which is a symbolic link to " +
                    (n > 0 ? quoted_text(std::string(target, static_cast<std::size_t>(n))) : std::string("?")) +
                    " that cannot be followed (" + std::strerror(stat_errno) + "); refusing to overwrite it " +
                    force_hint(o.key) + "; allowed: a new file name");
  }
  if (exists) {
    if (!S_ISREG(st.st_mode))
      throw PathError(named(o.key, path) + ", which is " + kind_of(st.st_mode) + "; allowed: a regular file");
    if (!o.force)
      throw PathError(named(o.key, path) + ": the file exists; refusing to overwrite it " + force_hint(o.key));
  }
}

}  // namespace

void check_input_file(const std::string& key, const std::string& path) {
  refuse_nul(key, path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw PathError(named(key, path) + ", which cannot be read (" + std::strerror(errno) +
                    "); allowed: an existing regular file");
  if (!S_ISREG(st.st_mode))
    throw PathError(named(key, path) + ", which is " + kind_of(st.st_mode) + "; allowed: a regular file");
  if (::access(path.c_str(), R_OK) != 0)
    throw PathError(named(key, path) + ", which is not readable (" + std::strerror(errno) + ")");
}

void check_outputs(const std::vector<OutputSpec>& outputs, const std::vector<InputSpec>& inputs) {
  std::vector<std::pair<const OutputSpec*, Identity>> outs;
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    check_output(o);
    outs.emplace_back(&o, identify(o.path));
  }
  for (std::size_t i = 0; i < outs.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (same_file(outs[i].second, outs[j].second))
        throw PathError("keys '" + outs[j].first->key + "' (" + quoted_text(outs[j].first->path) + ") and '" +
                        outs[i].first->key + "' (" + quoted_text(outs[i].first->path) +
                        ") name the same output file; allowed: a distinct file for each output");
    }
  }
  for (const auto& in : inputs) {
    if (in.path.empty()) continue;
    const Identity iid = identify(in.path);
    for (const auto& [o, oid] : outs) {
      if (same_file(oid, iid))
        throw PathError("key '" + o->key + "' (" + quoted_text(o->path) + ") names the input of '" + in.key + "' (" +
                        quoted_text(in.path) + "); allowed: an output that is not one of the run's inputs");
    }
  }
}

}  // namespace minipipe::io

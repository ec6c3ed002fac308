// The one way every output file is written (dump, checkpoint, JSON, SVG, trace, CSV): a unique
// temporary next to the target, created exclusively and never through a symlink, renamed over
// the target only when complete and only if the target did not appear meanwhile (or with force).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace minipipe::io {

// An output could not be written: the message names the file, the operation and the OS reason
// (strerror). It is a failure during the run (exit code 3), except where it is raised by an
// up-front check.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Temporary names are "<target>.tmp.XXXXXX" (six random characters of [A-Za-z0-9]).
constexpr std::size_t kTempSuffixLength = 11;

// One output file being written. Not copyable; movable only by pointer.
//
// The constructor creates the temporary with O_CREAT | O_EXCL | O_NOFOLLOW (a name that exists,
// a symlink included, is never opened: another random name is tried) and registers it for
// removal by the SIGINT/SIGTERM handler. write() writes every byte or throws; commit() fsyncs,
// closes and renames; any failure, and destruction without commit(), removes the temporary.
class OutputFile {
 public:
  OutputFile(const std::string& target, bool force);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // All `n` bytes (retrying short writes and EINTR) or OutputError naming the file.
  void write(const void* data, std::size_t n);

  // Closes the descriptor (checked) but keeps the temporary, for a library that writes the file
  // by name (HDF5). commit() then reopens it only to fsync it.
  void close_descriptor();

  // Flushes to stable storage, closes, and renames the temporary to the target: without force,
  // refused when the target exists by then ("appeared while it was written"); with force, an
  // existing file is replaced atomically. Also refused when the temporary is no longer the file
  // this object created. On failure the temporary is removed and OutputError thrown.
  void commit();

  // Removes the temporary now (idempotent, never throws).
  void discard() noexcept;

  const std::string& target() const { return target_; }
  const std::string& temp_path() const { return temp_; }
  bool committed() const { return committed_; }

 private:
  std::string target_, temp_;
  bool force_ = false;
  bool committed_ = false;
  bool removed_ = false;
  int fd_ = -1;
  int slot_ = -1;  // in the signal-safe registry of temporaries
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// Writes a text or binary output through OutputFile: `body` writes into the stream; every write
// of the stream is checked (the first failure, e.g. ENOSPC, is reported with the file and the OS
// reason) and nothing carries `path` unless all of it was written. Throws OutputError.
void write_output_file(const std::string& path, bool force, const std::function<void(std::ostream&)>& body);

// Renames `temp` to `target`: atomically refused when the target exists unless `force`
// (renameat2 RENAME_NOREPLACE; link + unlink where the file system lacks it). Throws OutputError;
// leaves `temp` in place on failure (the caller owns it).
void rename_into_place(const std::string& temp, const std::string& target, bool force);

}  // namespace minipipe::io

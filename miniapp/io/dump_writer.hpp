// Parallel HDF5 dump writer (MPI-IO driver): every rank creates the same datasets collectively,
// then each rank writes the rows it owns independently, into a unique temporary renamed on close.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace minipipe::io {

// How much a run dumps (docs/design.md §5): none; loss only; plus gradients and updated parameters;
// plus activations and input gradients.
enum class DumpLevel { none, loss, grads, full, kernels };

// "none" | "loss" | "grads" | "full"; anything else throws DumpError naming the allowed values.
DumpLevel parse_dump_level(const std::string& text);
const char* to_string(DumpLevel level);

// Element types of a dump. In memory: native float / double / int32; in the file: IEEE
// little-endian F32 / F64 and STD I32LE, so a file's bytes never depend on the writing host.
enum class DType { f32, f64, i32 };
const char* to_string(DType type);
std::size_t dtype_size(DType type);

// Every failure of the dump layer: bad path, overwrite refusal, HDF5 error, misuse. Messages
// name the file, the dataset and the offending value.
struct DumpError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Number of dump files whose HDF5 close failed even after the doomed temporary was emptied
// (a file system too full for the file's metadata alone). HDF5 keeps such a file open and, in
// HDF5 1.10, crashes closing it again inside MPI_Finalize (H5F__close_cb); a driver that sees a
// non-zero count ends with MPI_Abort, which skips that second close.
int unclosable_hdf5_files();

// One dump file shared by all ranks of `comm`.
//
// Collective calls (constructor, create_dataset, set_attribute, close) must be made by every
// rank with identical arguments in the same order; each one checks that (one small allreduce)
// and throws the same DumpError on every rank when they disagree, instead of deadlocking
// inside HDF5. write_rows is independent: exactly one rank writes any given row.
//
// close() checks that every row of every dataset was written exactly once before the file
// gets its final name, so a dump with holes never appears under `path`.
//
// The temporary is "<path>.tmp.XXXXXX" (see output_file.hpp): rank 0 creates it exclusively,
// never through a symlink, registered for removal on SIGINT/SIGTERM; two runs writing the same
// path never share a file, and the one that finishes second is refused unless force.
//
// Error paths: a DumpError thrown by a collective call is thrown on every rank, and the writer
// stays usable. If a DumpWriter is destroyed without close() (an exception unwinding), the
// destructor deletes the temporary on rank 0 and does no collective work, because the peers
// may be gone or waiting elsewhere (docs/design.md §7: the driver then aborts the communicator).
// On one rank it closes the HDF5 file properly (emptying the doomed temporary first, so that
// closing succeeds on a full file system); with more ranks the open HDF5 handles are left to
// HDF5's own shutdown at MPI_Finalize (or to MPI_Abort), never to a call that could hang.
// I/O failures (a full disk) name the file and the OS reason, seen on whichever rank failed.
class DumpWriter {
 public:
  // Collective. Rank 0 validates the path and every rank throws the same DumpError when:
  // `path` exists and !force ("refusing to overwrite <path>; pass --force"); `path` is a
  // directory; its directory is missing, not a directory, or not writable (the message names
  // the directory); or the temporary cannot be created. With force an existing file is
  // replaced only by the final rename, so it survives a failed run.
  DumpWriter(MPI_Comm comm, const std::string& path, bool force);
  ~DumpWriter();
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  // Collective. Creates a contiguous dataset (dims {} = scalar) and any missing parent groups.
  // The dataset stays open until close(). Paths are absolute or relative to the root.
  void create_dataset(const std::string& path, const std::vector<std::uint64_t>& dims, DType type);

  // Collective. Attaches (or replaces) an attribute on a dataset or group; a group that does
  // not exist yet is created ("/meta" needs no separate call). Strings are stored as
  // fixed-length UTF-8, numbers as F64LE / I64LE scalars.
  void set_attribute(const std::string& obj_path, const std::string& name, const std::string& value);
  void set_attribute(const std::string& obj_path, const std::string& name, const char* value) {
    set_attribute(obj_path, name, std::string(value));
  }
  void set_attribute(const std::string& obj_path, const std::string& name, double value);
  void set_attribute(const std::string& obj_path, const std::string& name, long long value);

  // Independent. Writes rows [row0, row0 + nrows) along dim 0 of a created dataset from a
  // contiguous host buffer (other dims full, row-major). Scalars: row0 = 0, nrows = 1.
  // `type` must equal the dataset's type. Errors here are local to the calling rank.
  void write_rows(const std::string& path, std::uint64_t row0, std::uint64_t nrows, const void* host_data, DType type);
  void write_rows(const std::string& path, std::uint64_t row0, std::uint64_t nrows, const float* data) {
    write_rows(path, row0, nrows, data, DType::f32);
  }
  void write_rows(const std::string& path, std::uint64_t row0, std::uint64_t nrows, const double* data) {
    write_rows(path, row0, nrows, data, DType::f64);
  }
  void write_rows(const std::string& path, std::uint64_t row0, std::uint64_t nrows, const std::int32_t* data) {
    write_rows(path, row0, nrows, data, DType::i32);
  }

  // Collective. Verifies full coverage, flushes and closes every handle and the file (each
  // checked), and rank 0 fsyncs and renames the temporary to `path`, refusing if `path`
  // appeared meanwhile (unless force); returns on every rank once the file is in place. On any
  // failure the temporary file is deleted and every rank throws the same DumpError.
  void close();

  // Collective. Removes `group` and every dataset under it from the file (e.g. the step that was
  // running when the run stopped, whose rows are only partly written); close() then checks the
  // coverage of the remaining datasets only. A group that was never created is ignored.
  void discard_group(const std::string& group);

  // Collective. Ends a run that stopped early but keeps what it completed: discards
  // `incomplete_groups`, records on /meta `stopped_early` = 1, `stop_reason` and
  // `completed_steps`, then close(). The dump then carries the final name like a full one.
  void close_stopped(const std::string& reason, long long completed_steps,
                     const std::vector<std::string>& incomplete_groups);

  const std::string& path() const;
  std::string temp_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minipipe::io

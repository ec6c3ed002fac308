// Up-front checks of the files a command will read and write: inputs are regular files, outputs
// fit the length limits of the file system and of MPI-IO, and no two of them are the same file.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace minipipe::io {

// A path given by the user is unusable; the message names the key, the value (escaped) and what
// is allowed. Bad input: exit code 2.
struct PathError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Longest file name OpenMPI's MPI-IO accepts: its lockedfile shared-file-pointer component
// formats "<name>.lock<jobid>" into a 256-byte buffer and aborts the process ("buffer overflow
// detected") beyond it. Measured with OpenMPI 4.1.4: a 245-byte name aborted, 244 worked, with a
// six-digit job id; a job id prints as up to 11 characters, so 255 - 5 - 11 = 239 is safe.
constexpr std::size_t kMpiIoNameMax = 239;

struct OutputSpec {
  std::string key;      // the deck key or flag that named it, e.g. "output.json"
  std::string path;     // empty = not written (skipped)
  bool force = false;   // an existing file may be replaced
  bool mpi_io = false;  // written through MPI-IO (HDF5 dumps, checkpoints): kMpiIoNameMax applies
};

struct InputSpec {
  std::string key;   // e.g. "--deck", "pipeline.csv", "data.path"
  std::string path;  // empty = not read (skipped)
};

// An input must exist and be a readable regular file (a symlink to one is fine): a directory, a
// FIFO, a device or a socket is refused. Throws PathError.
void check_input_file(const std::string& key, const std::string& path);

// For every output: its directory exists and is writable; its temporary name (path + 11
// characters) fits NAME_MAX and PATH_MAX of that directory (pathconf) and, for MPI-IO outputs,
// kMpiIoNameMax; it is not a directory or other non-regular file; it does not exist unless
// force. Then no two outputs, and no output and input, are the same file: compared by device and
// inode where both exist, by the canonical absolute path otherwise (symlinks resolved, so a link
// to the deck counts as the deck). Throws PathError naming both keys.
void check_outputs(const std::vector<OutputSpec>& outputs, const std::vector<InputSpec>& inputs);

}  // namespace minipipe::io

// Serial HDF5 reading for miniPipe: token input files, dump inspection in tests, and the file
// walk and block reads behind `minipipe compare`. Errors name the file and the dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace minipipe::io {

// A file or dataset that cannot be read as asked: missing, not HDF5, wrong type or shape.
struct ReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class ValueClass { floating, signed_int, unsigned_int, other };

// A dataset's shape as text, "[10,8,16]" ("[]" for a scalar): one spelling in every message.
std::string dims_text(const std::vector<std::uint64_t>& dims);

struct DatasetInfo {
  std::string path;                 // absolute, e.g. "/step_0000/grads/wte"
  std::vector<std::uint64_t> dims;  // {} for a scalar
  ValueClass value_class = ValueClass::other;
  std::size_t elem_size = 0;     // bytes per element in memory (native representation)
  bool variable_length = false;  // vlen data / strings: no fixed bytes to compare
  std::string type_text;         // "f32", "f64", "i32", "u8", "string", "compound16", ...

  std::uint64_t elements() const;
  std::uint64_t rows() const { return dims.empty() ? 1 : dims[0]; }
  std::uint64_t row_elements() const;  // elements per row along dim 0 (1 for scalars)
};

// An HDF5 file opened read-only by one process (no MPI needed).
class DumpReader {
 public:
  // ReadError when the file is missing, unreadable or not HDF5.
  explicit DumpReader(const std::string& path);
  ~DumpReader();
  DumpReader(const DumpReader&) = delete;
  DumpReader& operator=(const DumpReader&) = delete;

  const std::string& path() const { return path_; }

  // Every object reachable through hard links, sorted by path. Subtrees named in `skip`
  // (e.g. "/meta") are left out. Groups come with is_group = true.
  struct Object {
    std::string path;
    bool is_group = false;
  };
  std::vector<Object> list_objects(const std::vector<std::string>& skip = {}) const;
  std::vector<DatasetInfo> list_datasets(const std::vector<std::string>& skip = {}) const;
  bool has_dataset(const std::string& dataset) const;
  DatasetInfo info(const std::string& dataset) const;

  // Rows [row0, row0 + nrows) along dim 0 in native representation (info().elem_size bytes
  // per element). Scalars: row0 = 0, nrows = 1.
  void read_rows(const DatasetInfo& info, std::uint64_t row0, std::uint64_t nrows, void* out) const;

  // Whole datasets. read_i32 accepts any integer type whose values fit in int32 (tokens may be
  // stored as i64 or u16); read_f32 / read_f64 require exactly that float type.
  std::vector<std::int32_t> read_i32(const std::string& dataset, std::vector<std::uint64_t>& dims) const;
  std::vector<float> read_f32(const std::string& dataset, std::vector<std::uint64_t>& dims) const;
  std::vector<double> read_f64(const std::string& dataset, std::vector<std::uint64_t>& dims) const;

  // Attributes of a group or dataset ("/" is the root).
  std::vector<std::string> attribute_names(const std::string& object) const;
  std::string string_attribute(const std::string& object, const std::string& name) const;
  double double_attribute(const std::string& object, const std::string& name) const;
  long long int_attribute(const std::string& object, const std::string& name) const;
  // Any attribute as canonical text ("string:...", "int:1,2", "float:0.5", "raw:<hex>"), so
  // two files' attributes compare with ==, type included.
  std::string attribute_text(const std::string& object, const std::string& name) const;

 private:
  std::string path_;
  std::int64_t file_ = -1;  // hid_t; kept out of this header so users need no hdf5.h
};

// One-call form for token input: the dataset as int32 with its shape in `dims`.
std::vector<std::int32_t> read_i32(const std::string& path, const std::string& dataset,
                                   std::vector<std::uint64_t>& dims);

}  // namespace minipipe::io

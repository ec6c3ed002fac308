// Serial HDF5 reader: opens a dump or token file read-only, walks its hard-linked objects,
// reads datasets in native representation and attributes as typed values or canonical text.
#include "miniapp/io/dump_reader.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>
#include <type_traits>

#include "miniapp/io/h5_handle.hpp"

namespace minipipe::io {

using detail::h5_error_text;
using detail::H5Handle;
using detail::H5QuietErrors;

static_assert(std::is_same_v<hid_t, std::int64_t>, "DumpReader stores hid_t as std::int64_t");

std::uint64_t DatasetInfo::elements() const {
  std::uint64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

std::uint64_t DatasetInfo::row_elements() const {
  std::uint64_t n = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

namespace {

constexpr int kMaxDepth = 64;  // guards against hard-link cycles

bool skipped(const std::string& p, const std::vector<std::string>& skip) {
  for (const auto& s : skip) {
    if (p == s || (p.size() > s.size() && p.compare(0, s.size(), s) == 0 && p[s.size()] == '/')) return true;
  }
  return false;
}

std::string normalize(const std::string& p) {
  return (!p.empty() && p[0] == '/') ? p : "/" + p;
}

// Memory type in which a file type is read: native numbers, the file type itself otherwise.
H5Handle memory_type_for(hid_t ftype) {
  const H5T_class_t cls = H5Tget_class(ftype);
  if (cls == H5T_INTEGER || cls == H5T_FLOAT) return H5Handle(H5Tget_native_type(ftype, H5T_DIR_ASCEND), H5Tclose);
  return H5Handle(H5Tcopy(ftype), H5Tclose);
}

std::string type_text(hid_t ftype, ValueClass vc, std::size_t size) {
  switch (vc) {
    case ValueClass::floating:
      return "f" + std::to_string(8 * size);
    case ValueClass::signed_int:
      return "i" + std::to_string(8 * size);
    case ValueClass::unsigned_int:
      return "u" + std::to_string(8 * size);
    case ValueClass::other:
      break;
  }
  switch (H5Tget_class(ftype)) {
    case H5T_STRING:
      return H5Tis_variable_str(ftype) > 0 ? "string(vlen)" : "string" + std::to_string(size);
    case H5T_COMPOUND:
      return "compound" + std::to_string(size);
    case H5T_ARRAY:
      return "array" + std::to_string(size);
    case H5T_ENUM:
      return "enum" + std::to_string(size);
    case H5T_VLEN:
      return "vlen";
    case H5T_OPAQUE:
      return "opaque" + std::to_string(size);
    case H5T_BITFIELD:
      return "bitfield" + std::to_string(size);
    case H5T_REFERENCE:
      return "reference" + std::to_string(size);
    default:
      return "unknown" + std::to_string(size);
  }
}

}  // namespace

std::string dims_text(const std::vector<std::uint64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

DumpReader::DumpReader(const std::string& path) : path_(path) {
  H5QuietErrors quiet;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) throw ReadError("cannot open " + path + ": no such file");
  if (std::filesystem::is_directory(st)) throw ReadError("cannot open " + path + ": is a directory");
  // A FIFO would block the open below forever, a device read garbage: only regular files.
  if (!std::filesystem::is_regular_file(st))
    throw ReadError("cannot open " + path + ": not a regular file (a FIFO, device or socket); allowed: an HDF5 file");
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    throw ReadError("cannot open " + path + ": not readable");
  }
#if H5_VERSION_GE(1, 12, 0)
  const htri_t is_hdf5 = H5Fis_accessible(path.c_str(), H5P_DEFAULT);  // H5Fis_hdf5 is deprecated
#else
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
#endif
  if (is_hdf5 <= 0) throw ReadError(path + " is not an HDF5 file");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) throw ReadError("cannot open HDF5 file " + path + ": " + h5_error_text());
}

DumpReader::~DumpReader() {
  if (file_ >= 0) {
    H5QuietErrors quiet;
    H5Fclose(file_);
  }
}

std::vector<DumpReader::Object> DumpReader::list_objects(const std::vector<std::string>& skip) const {
  H5QuietErrors quiet;
  std::vector<Object> out;
  // Depth-first over hard links only: soft and external links could dangle or loop.
  struct Walker {
    const DumpReader& r;
    const std::vector<std::string>& skip;
    std::vector<Object>& out;
    void walk(hid_t group, const std::string& prefix, int depth) {
      if (depth > kMaxDepth) throw ReadError(r.path_ + ": group nesting deeper than 64 at " + prefix);
      H5G_info_t gi;
      if (H5Gget_info(group, &gi) < 0)
        throw ReadError(r.path_ + ": cannot read group " + prefix + ": " + h5_error_text());
      for (hsize_t i = 0; i < gi.nlinks; ++i) {
        const ssize_t len = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
        if (len < 0) throw ReadError(r.path_ + ": cannot list group " + prefix + ": " + h5_error_text());
        std::string name(static_cast<std::size_t>(len) + 1, '\0');
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
        name.resize(static_cast<std::size_t>(len));
        const std::string full = (prefix == "/" ? "/" : prefix + "/") + name;
        if (skipped(full, skip)) continue;
        H5L_info_t li;
        if (H5Lget_info(group, name.c_str(), &li, H5P_DEFAULT) < 0 || li.type != H5L_TYPE_HARD) continue;
        H5Handle obj(H5Oopen(group, name.c_str(), H5P_DEFAULT), H5Oclose);
        if (!obj.valid()) throw ReadError(r.path_ + ": cannot open " + full + ": " + h5_error_text());
        const H5I_type_t t = H5Iget_type(obj.get());
        if (t == H5I_GROUP) {
          out.push_back({full, true});
          walk(obj.get(), full, depth + 1);
        } else if (t == H5I_DATASET) {
          out.push_back({full, false});
        }
      }
    }
  };
  H5Handle root(H5Gopen2(file_, "/", H5P_DEFAULT), H5Gclose);
  if (!root.valid()) throw ReadError(path_ + ": cannot open the root group: " + h5_error_text());
  Walker{*this, skip, out}.walk(root.get(), "/", 0);
  std::sort(out.begin(), out.end(), [](const Object& a, const Object& b) { return a.path < b.path; });
  return out;
}

std::vector<DatasetInfo> DumpReader::list_datasets(const std::vector<std::string>& skip) const {
  std::vector<DatasetInfo> out;
  for (const auto& o : list_objects(skip))
    if (!o.is_group) out.push_back(info(o.path));
  return out;
}

bool DumpReader::has_dataset(const std::string& dataset) const {
  H5QuietErrors quiet;
  H5Handle obj(H5Oopen(file_, normalize(dataset).c_str(), H5P_DEFAULT), H5Oclose);
  const bool yes = obj.valid() && H5Iget_type(obj.get()) == H5I_DATASET;
  H5Eclear2(H5E_DEFAULT);
  return yes;
}

DatasetInfo DumpReader::info(const std::string& dataset) const {
  H5QuietErrors quiet;
  DatasetInfo di;
  di.path = normalize(dataset);
  H5Handle obj(H5Oopen(file_, di.path.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.valid() || H5Iget_type(obj.get()) != H5I_DATASET) {
    H5Eclear2(H5E_DEFAULT);
    throw ReadError(path_ + ": no dataset " + di.path);
  }
  H5Handle space(H5Dget_space(obj.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw ReadError(path_ + ": dataset " + di.path + " has an unreadable shape");
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL)
    throw ReadError(path_ + ": dataset " + di.path + " has a null dataspace");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  di.dims.assign(dims.begin(), dims.end());

  H5Handle ftype(H5Dget_type(obj.get()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(ftype.get());
  H5Handle mtype = memory_type_for(ftype.get());
  di.elem_size = H5Tget_size(mtype.get());
  if (cls == H5T_FLOAT && (di.elem_size == 4 || di.elem_size == 8)) {
    di.value_class = ValueClass::floating;
  } else if (cls == H5T_INTEGER) {
    di.value_class = H5Tget_sign(ftype.get()) == H5T_SGN_2 ? ValueClass::signed_int : ValueClass::unsigned_int;
  }
  di.variable_length = H5Tdetect_class(ftype.get(), H5T_VLEN) > 0 || H5Tis_variable_str(ftype.get()) > 0;
  di.type_text = type_text(ftype.get(), di.value_class, H5Tget_size(ftype.get()));
  return di;
}

void DumpReader::read_rows(const DatasetInfo& di, std::uint64_t row0, std::uint64_t nrows, void* out) const {
  H5QuietErrors quiet;
  if (row0 > di.rows() || nrows > di.rows() - row0)
    throw ReadError(path_ + ": rows [" + std::to_string(row0) + ", " + std::to_string(row0 + nrows) +
                    ") outside dataset " + di.path + " " + dims_text(di.dims));
  if (nrows == 0) return;
  if (di.variable_length) throw ReadError(path_ + ": dataset " + di.path + " has variable-length data");
  H5Handle d(H5Dopen2(file_, di.path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!d.valid()) throw ReadError(path_ + ": cannot open dataset " + di.path + ": " + h5_error_text());
  H5Handle ftype(H5Dget_type(d.get()), H5Tclose);
  H5Handle mtype = memory_type_for(ftype.get());
  herr_t status = 0;
  if (di.dims.empty()) {
    status = H5Dread(d.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
  } else {
    std::vector<hsize_t> start(di.dims.size(), 0), count(di.dims.begin(), di.dims.end());
    start[0] = row0;
    count[0] = nrows;
    H5Handle fspace(H5Dget_space(d.get()), H5Sclose);
    H5Handle mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
    status = H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    if (status >= 0) status = H5Dread(d.get(), mtype.get(), mspace.get(), fspace.get(), H5P_DEFAULT, out);
  }
  if (status < 0) throw ReadError(path_ + ": cannot read dataset " + di.path + ": " + h5_error_text());
}

std::vector<std::int32_t> DumpReader::read_i32(const std::string& dataset, std::vector<std::uint64_t>& dims) const {
  const DatasetInfo di = info(dataset);
  const std::string where = path_ + ", dataset " + di.path;
  if (di.value_class != ValueClass::signed_int && di.value_class != ValueClass::unsigned_int)
    throw ReadError(where + ": has type " + di.type_text + "; expected an integer type");
  const std::uint64_t n = di.elements();
  std::vector<std::int32_t> out(n);
  // Read at the stored width, then narrow with a range check: HDF5's own conversion would
  // clip out-of-range values silently.
  auto narrow = [&](const auto* values) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(values)>>;
    for (std::uint64_t i = 0; i < n; ++i) {
      bool fits = true;
      if constexpr (std::is_signed_v<T>) {
        const long long w = values[i];
        fits = w >= std::numeric_limits<std::int32_t>::min() && w <= std::numeric_limits<std::int32_t>::max();
      } else {
        const unsigned long long w = values[i];
        fits = w <= static_cast<unsigned long long>(std::numeric_limits<std::int32_t>::max());
      }
      if (!fits)
        throw ReadError(where + ": element " + std::to_string(i) + " = " + std::to_string(values[i]) +
                        " does not fit in int32");
      out[i] = static_cast<std::int32_t>(values[i]);
    }
  };
  auto read_as = [&](auto tag) {
    using T = decltype(tag);
    if (di.elem_size != sizeof(T)) throw ReadError(where + ": unexpected element size");
    std::vector<T> raw(n);
    read_rows(di, 0, di.rows(), raw.data());
    narrow(raw.data());
  };
  const bool s = di.value_class == ValueClass::signed_int;
  switch (di.elem_size) {
    case 1:
      s ? read_as(std::int8_t{}) : read_as(std::uint8_t{});
      break;
    case 2:
      s ? read_as(std::int16_t{}) : read_as(std::uint16_t{});
      break;
    case 4:
      s ? read_as(std::int32_t{}) : read_as(std::uint32_t{});
      break;
    case 8:
      s ? read_as(std::int64_t{}) : read_as(std::uint64_t{});
      break;
    default:
      throw ReadError(where + ": unsupported integer width " + std::to_string(di.elem_size));
  }
  dims = di.dims;
  return out;
}

namespace {
template <typename T>
std::vector<T> read_float(const DumpReader& r, const std::string& dataset, std::vector<std::uint64_t>& dims) {
  const DatasetInfo di = r.info(dataset);
  if (di.value_class != ValueClass::floating || di.elem_size != sizeof(T))
    throw ReadError(r.path() + ", dataset " + di.path + ": has type " + di.type_text + "; expected f" +
                    std::to_string(8 * sizeof(T)));
  std::vector<T> out(di.elements());
  r.read_rows(di, 0, di.rows(), out.data());
  dims = di.dims;
  return out;
}
}  // namespace

std::vector<float> DumpReader::read_f32(const std::string& dataset, std::vector<std::uint64_t>& dims) const {
  return read_float<float>(*this, dataset, dims);
}

std::vector<double> DumpReader::read_f64(const std::string& dataset, std::vector<std::uint64_t>& dims) const {
  return read_float<double>(*this, dataset, dims);
}

std::vector<std::string> DumpReader::attribute_names(const std::string& object) const {
  H5QuietErrors quiet;
  H5Handle obj(H5Oopen(file_, normalize(object).c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.valid()) throw ReadError(path_ + ": no object " + normalize(object));
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Aiterate2(obj.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names) < 0)
    throw ReadError(path_ + ": cannot list attributes of " + normalize(object) + ": " + h5_error_text());
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

struct AttrHandle {
  H5Handle attr, type, space;
  H5T_class_t cls = H5T_NO_CLASS;
  hssize_t count = 0;
};

AttrHandle open_attribute(hid_t file, const std::string& fpath, const std::string& object, const std::string& name) {
  AttrHandle a;
  const std::string obj = normalize(object);
  a.attr = H5Handle(H5Aopen_by_name(file, obj.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!a.attr.valid()) {
    H5Eclear2(H5E_DEFAULT);
    throw ReadError(fpath + ": no attribute " + name + " on " + obj);
  }
  a.type = H5Handle(H5Aget_type(a.attr.get()), H5Tclose);
  a.space = H5Handle(H5Aget_space(a.attr.get()), H5Sclose);
  a.cls = H5Tget_class(a.type.get());
  a.count = H5Sget_simple_extent_npoints(a.space.get());
  return a;
}

std::vector<std::string> read_strings(const AttrHandle& a, const std::string& where) {
  const auto n = static_cast<std::size_t>(a.count);
  std::vector<std::string> out;
  if (H5Tis_variable_str(a.type.get()) > 0) {
    H5Handle mt(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mt.get(), H5T_VARIABLE);
    H5Tset_cset(mt.get(), H5Tget_cset(a.type.get()));
    std::vector<char*> ptrs(n, nullptr);
    if (H5Aread(a.attr.get(), mt.get(), ptrs.data()) < 0) throw ReadError(where + ": " + h5_error_text());
    for (char* p : ptrs) {
      out.emplace_back(p ? p : "");
      if (p) H5free_memory(p);
    }
  } else {
    const std::size_t sz = H5Tget_size(a.type.get());
    std::vector<char> buf(n * sz);
    if (H5Aread(a.attr.get(), a.type.get(), buf.data()) < 0) throw ReadError(where + ": " + h5_error_text());
    for (std::size_t i = 0; i < n; ++i) {
      std::string s(buf.data() + i * sz, sz);
      // NULLTERM / NULLPAD strings end at the first NUL; SPACEPAD ones lose trailing blanks.
      const auto nul = s.find('\0');
      if (nul != std::string::npos) s.resize(nul);
      if (H5Tget_strpad(a.type.get()) == H5T_STR_SPACEPAD) s.erase(s.find_last_not_of(' ') + 1);
      out.push_back(s);
    }
  }
  return out;
}

template <typename T>
std::vector<T> read_numbers(const AttrHandle& a, hid_t mtype, const std::string& where) {
  std::vector<T> out(static_cast<std::size_t>(a.count));
  if (H5Aread(a.attr.get(), mtype, out.data()) < 0) throw ReadError(where + ": " + h5_error_text());
  return out;
}

}  // namespace

std::string DumpReader::string_attribute(const std::string& object, const std::string& name) const {
  H5QuietErrors quiet;
  const AttrHandle a = open_attribute(file_, path_, object, name);
  const std::string where = path_ + ", attribute " + normalize(object) + "@" + name;
  if (a.cls != H5T_STRING) throw ReadError(where + ": is not a string");
  const auto v = read_strings(a, where);
  if (v.size() != 1) throw ReadError(where + ": holds " + std::to_string(v.size()) + " strings, expected 1");
  return v[0];
}

double DumpReader::double_attribute(const std::string& object, const std::string& name) const {
  H5QuietErrors quiet;
  const AttrHandle a = open_attribute(file_, path_, object, name);
  const std::string where = path_ + ", attribute " + normalize(object) + "@" + name;
  if (a.cls != H5T_FLOAT || a.count != 1) throw ReadError(where + ": is not a scalar float");
  return read_numbers<double>(a, H5T_NATIVE_DOUBLE, where)[0];
}

long long DumpReader::int_attribute(const std::string& object, const std::string& name) const {
  H5QuietErrors quiet;
  const AttrHandle a = open_attribute(file_, path_, object, name);
  const std::string where = path_ + ", attribute " + normalize(object) + "@" + name;
  if (a.cls != H5T_INTEGER || a.count != 1) throw ReadError(where + ": is not a scalar integer");
  return read_numbers<long long>(a, H5T_NATIVE_LLONG, where)[0];
}

std::string DumpReader::attribute_text(const std::string& object, const std::string& name) const {
  H5QuietErrors quiet;
  const AttrHandle a = open_attribute(file_, path_, object, name);
  const std::string where = path_ + ", attribute " + normalize(object) + "@" + name;
  std::ostringstream os;
  if (a.cls == H5T_STRING) {
    os << "string:";
    const auto v = read_strings(a, where);
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "\x1f" : "") << v[i];
  } else if (a.cls == H5T_INTEGER && H5Tget_sign(a.type.get()) != H5T_SGN_2) {
    os << "uint:";
    const auto v = read_numbers<unsigned long long>(a, H5T_NATIVE_ULLONG, where);
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  } else if (a.cls == H5T_INTEGER) {
    os << "int:";
    const auto v = read_numbers<long long>(a, H5T_NATIVE_LLONG, where);
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  } else if (a.cls == H5T_FLOAT) {
    os << "float:";
    os.precision(std::numeric_limits<double>::max_digits10);
    const auto v = read_numbers<double>(a, H5T_NATIVE_DOUBLE, where);
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  } else {
    if (H5Tdetect_class(a.type.get(), H5T_VLEN) > 0) return "vlen:(not compared)";
    const std::size_t sz = H5Tget_size(a.type.get());
    std::vector<unsigned char> buf(sz * static_cast<std::size_t>(a.count));
    if (H5Aread(a.attr.get(), a.type.get(), buf.data()) < 0) throw ReadError(where + ": " + h5_error_text());
    os << "raw:" << std::hex;
    for (unsigned char c : buf) os << (c < 16 ? "0" : "") << static_cast<int>(c);
  }
  return os.str();
}

std::vector<std::int32_t> read_i32(const std::string& path, const std::string& dataset,
                                   std::vector<std::uint64_t>& dims) {
  const DumpReader r(path);
  return r.read_i32(dataset, dims);
}

}  // namespace minipipe::io

// Parallel HDF5 dump writer: collective creation of contiguous datasets, independent row writes,
// a coverage check and an atomic rename at close so no partial dump ever carries the final name.
#include "miniapp/io/dump_writer.hpp"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "miniapp/io/dump_reader.hpp"
#include "miniapp/io/h5_handle.hpp"
#include "miniapp/io/output_file.hpp"
#include "util/agree.hpp"

namespace minipipe::io {

using detail::h5_error_text;
using detail::H5Handle;
using detail::H5QuietErrors;

DumpLevel parse_dump_level(const std::string& text) {
  if (text == "none") return DumpLevel::none;
  if (text == "loss") return DumpLevel::loss;
  if (text == "grads") return DumpLevel::grads;
  if (text == "full") return DumpLevel::full;
  if (text == "kernels") return DumpLevel::kernels;
  throw DumpError("invalid dump level \"" + text + "\"; allowed values: none, loss, grads, full, kernels");
}

const char* to_string(DumpLevel level) {
  switch (level) {
    case DumpLevel::none:
      return "none";
    case DumpLevel::loss:
      return "loss";
    case DumpLevel::grads:
      return "grads";
    case DumpLevel::full:
      return "full";
    case DumpLevel::kernels:
      return "kernels";
  }
  return "?";
}

const char* to_string(DType type) {
  switch (type) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
  }
  return "?";
}

std::size_t dtype_size(DType type) {
  switch (type) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i32:
      return 4;
  }
  return 0;
}

namespace {

namespace fs = std::filesystem;

hid_t memory_type(DType type) {
  switch (type) {
    case DType::f32:
      return H5T_NATIVE_FLOAT;
    case DType::f64:
      return H5T_NATIVE_DOUBLE;
    case DType::i32:
      return H5T_NATIVE_INT32;
  }
  return H5I_INVALID_HID;
}

// Fixed little-endian file types: the bytes on disk do not depend on the host that wrote them.
hid_t file_type(DType type) {
  switch (type) {
    case DType::f32:
      return H5T_IEEE_F32LE;
    case DType::f64:
      return H5T_IEEE_F64LE;
    case DType::i32:
      return H5T_STD_I32LE;
  }
  return H5I_INVALID_HID;
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// True on every rank iff every rank passed the same `desc`. MAX of h and of ~h equals the
// rank's own values only when the minimum equals the maximum, so all ranks agree on the answer.
bool same_on_all_ranks(MPI_Comm comm, const std::string& desc) {
  const std::uint64_t h = fnv1a(desc);
  std::uint64_t in[2] = {h, ~h};
  std::uint64_t out[2] = {0, 0};
  MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, comm);
  return out[0] == h && out[1] == ~h;
}

// Rank 0's string on every rank.
std::string bcast_string(MPI_Comm comm, std::string s) {
  unsigned long long n = s.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
  s.resize(n);
  if (n > 0) MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, comm);
  return s;
}

std::vector<std::string> split_components(const std::string& p) {
  std::vector<std::string> parts;
  std::size_t start = 1;  // p is normalized: leading '/'
  while (start < p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    parts.push_back(p.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// "/a/b" from "a/b" or "/a/b"; "/" for the root. Empty, "." and ".." components are refused
// because HDF5 would either reject them or resolve them to a different object.
std::string normalize_object_path(const std::string& p, const std::string& what) {
  std::string n = (!p.empty() && p[0] == '/') ? p : "/" + p;
  if (n == "/") return n;
  if (n.back() == '/') throw DumpError(what + ": object path \"" + p + "\" ends with '/'");
  for (const auto& c : split_components(n)) {
    if (c.empty() || c == "." || c == "..")
      throw DumpError(what + ": object path \"" + p + "\" has an empty, \".\" or \"..\" component");
  }
  return n;
}

std::string parent_of(const std::string& p) {
  const auto pos = p.rfind('/');
  return pos == 0 ? "/" : p.substr(0, pos);
}

// Rank 0's check of the target before anything is created; empty string = fine.
std::string validate_target(const std::string& path, bool force) {
  if (path.empty()) return "dump path is empty";
  const fs::path p(path);
  if (p.filename().empty()) return "dump path " + path + " names a directory, not a file";
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  const auto dst = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return "cannot write dump " + path + ": cannot access directory " + dir.string() + " (" + ec.message() + ")";
  if (!fs::exists(dst)) return "cannot write dump " + path + ": directory " + dir.string() + " does not exist";
  if (!fs::is_directory(dst)) return "cannot write dump " + path + ": " + dir.string() + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot write dump " + path + ": directory " + dir.string() + " is not writable (" + std::strerror(errno) +
           ")";
  const auto pst = fs::status(p, ec);
  if (fs::exists(pst)) {
    if (fs::is_directory(pst)) return "dump path " + path + " is an existing directory";
    if (!force) return "refusing to overwrite " + path + "; pass --force";
  }
  return {};
}

// Why an HDF5 call on `file` failed: HDF5's innermost messages, else the errno the failing
// system call left (MPI-IO reports ENOSPC only on stderr, so HDF5's stack is often empty), and
// a full file system named as such.
std::string failure_reason(const std::string& file, int saved_errno) {
  std::string why = h5_error_text();
  if (saved_errno != 0) why += (why.empty() ? "" : "; ") + std::string(std::strerror(saved_errno));
  struct statvfs vfs {};
  std::string dir = fs::path(file).parent_path().string();
  if (dir.empty()) dir = ".";
  if (saved_errno != ENOSPC && ::statvfs(dir.c_str(), &vfs) == 0 && vfs.f_bavail == 0)
    why += (why.empty() ? "" : "; ") + std::string("the file system of ") + dir + " is full (" + std::strerror(ENOSPC) +
           ")";
  return why.empty() ? std::string("HDF5 and the operating system gave no reason") : why;
}

// Every rank's view of the first failure: the lowest failing rank's text ("" = none failed).
std::string first_error(MPI_Comm comm, const std::string& local) {
  const util::EarliestText e = util::first_failure(comm, local.empty() ? nullptr : &local);
  if (e.root < 0) return {};
  return e.root == 0 ? e.text : e.text + " (on rank " + std::to_string(e.root) + ")";
}

// Files whose H5Fclose failed: HDF5 keeps them open and closes them again at MPI_Finalize.
std::atomic<int> g_unclosed_files{0};

}  // namespace

int unclosable_hdf5_files() {
  return g_unclosed_files.load();
}

struct DumpWriter::Impl {
  struct Dataset {
    std::string path;
    std::vector<std::uint64_t> dims;
    DType type;
    H5Handle id;
    bool discarded = false;  // its group was removed by discard_group(); not in the file
  };

  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  std::string path;
  std::string tmp;
  bool force = false;
  bool finished = false;            // close() ran, successfully or not
  std::unique_ptr<OutputFile> out;  // rank 0: the exclusive temporary and its final rename
  H5Handle file;
  H5Handle dxpl;  // independent transfers: a write may come from one rank alone
  std::vector<Dataset> datasets;
  std::map<std::string, std::size_t> by_path;
  std::set<std::string> groups{"/"};
  std::vector<std::uint64_t> writes;  // (dataset index, row0, nrows) triplets from this rank

  void check_open(const std::string& what) const {
    if (finished) throw DumpError(what + ": dump " + path + " is already closed");
  }

  // Collective argument check; the same exception on every rank when ranks disagree.
  void check_same(const std::string& what, const std::string& desc) const {
    if (!same_on_all_ranks(comm, desc))
      throw DumpError(what + " on " + path +
                      ": ranks passed different arguments; collective dump calls need identical "
                      "arguments in the same order on every rank");
  }

  // Creates the missing groups along `group_path` (collective); refuses to go through a dataset.
  void ensure_groups(const std::string& group_path, const std::string& what) {
    std::string cur;
    for (const auto& c : split_components(group_path)) {
      cur += "/" + c;
      if (by_path.count(cur)) throw DumpError(what + ": " + cur + " is a dataset, not a group");
      if (groups.count(cur)) continue;
      H5Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
      H5Pset_obj_track_times(gcpl.get(), false);  // no timestamps: identical runs, identical files
      H5Handle g(H5Gcreate2(file.get(), cur.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose);
      if (!g.valid()) throw DumpError(what + ": cannot create group " + cur + " in " + tmp + ": " + h5_error_text());
      groups.insert(cur);
    }
  }

  // Collective. Closes datasets then the file; false if HDF5 reported a failure (e.g. a
  // failed flush), which must keep the file from being renamed.
  bool close_handles() {
    bool ok = true;
    for (auto& d : datasets) ok = d.id.reset() && ok;
    const bool file_ok = file.reset();
    if (!file_ok) g_unclosed_files.fetch_add(1);
    dxpl.reset();
    return ok && file_ok;
  }

  // For the destructor on several ranks: closing would be collective, so just forget the ids.
  void abandon_handles() {
    for (auto& d : datasets) d.id.release();
    file.release();
    dxpl.reset();  // property lists are process-local
  }

  // Rank 0, on the way to deleting the temporary: empties it so that HDF5's closing flush finds
  // space again on a full file system. A close that fails leaves the file id open inside HDF5,
  // which then crashes closing it again at MPI_Finalize (H5F__close_cb); a close that succeeds
  // does not. The metadata it writes lands past the cut, in a file about to be deleted.
  void free_space_of_temporary() const {
    if (rank == 0 && !tmp.empty()) (void)::truncate(tmp.c_str(), 0);
  }

  void write_attribute(const std::string& obj_path, const std::string& name, hid_t ftype, hid_t mtype, const void* buf,
                       const std::string& value_desc);

  // Rank 0: every dataset's rows written exactly once, from all ranks' write records.
  std::string coverage_problems(const std::vector<std::uint64_t>& all_writes) const;
};

void DumpWriter::Impl::write_attribute(const std::string& obj_path, const std::string& name, hid_t ftype, hid_t mtype,
                                       const void* buf, const std::string& value_desc) {
  const std::string what = "set_attribute(" + obj_path + ", " + name + ")";
  check_open(what);
  const std::string p = normalize_object_path(obj_path, what);
  check_same(what, "attr|" + p + "|" + name + "|" + value_desc);
  if (name.empty()) throw DumpError(what + ": attribute name is empty");

  H5Handle group;
  hid_t obj = H5I_INVALID_HID;
  const auto it = by_path.find(p);
  if (it != by_path.end()) {
    obj = datasets[it->second].id.get();
  } else {
    ensure_groups(p, what);
    group = H5Handle(H5Gopen2(file.get(), p.c_str(), H5P_DEFAULT), H5Gclose);
    if (!group.valid()) throw DumpError(what + ": cannot open group " + p + ": " + h5_error_text());
    obj = group.get();
  }
  const htri_t exists = H5Aexists(obj, name.c_str());
  if (exists < 0) throw DumpError(what + ": " + h5_error_text());
  if (exists > 0 && H5Adelete(obj, name.c_str()) < 0)
    throw DumpError(what + ": cannot replace the existing attribute: " + h5_error_text());
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(obj, name.c_str(), ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) throw DumpError(what + ": cannot create attribute: " + h5_error_text());
  if (H5Awrite(attr.get(), mtype, buf) < 0) throw DumpError(what + ": cannot write attribute: " + h5_error_text());
}

std::string DumpWriter::Impl::coverage_problems(const std::vector<std::uint64_t>& all_writes) const {
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> spans(datasets.size());
  for (std::size_t i = 0; i + 2 < all_writes.size(); i += 3)
    spans[all_writes[i]].emplace_back(all_writes[i + 1], all_writes[i + 1] + all_writes[i + 2]);
  std::vector<std::string> problems;
  auto note = [&](const Dataset& d, std::uint64_t a, std::uint64_t b, const char* why) {
    problems.push_back("dataset " + d.path + " " + dims_text(d.dims) + " rows [" + std::to_string(a) + ", " +
                       std::to_string(b) + ") " + why);
  };
  for (std::size_t k = 0; k < datasets.size(); ++k) {
    const Dataset& d = datasets[k];
    if (d.discarded) continue;
    const std::uint64_t rows = d.dims.empty() ? 1 : d.dims[0];
    auto& s = spans[k];
    std::sort(s.begin(), s.end());
    std::uint64_t covered = 0;  // rows [0, covered) are written
    for (const auto& [a, b] : s) {
      if (a > covered) note(d, covered, a, "never written");
      if (a < covered) note(d, a, std::min(b, covered), "written more than once");
      covered = std::max(covered, b);
    }
    if (covered < rows) note(d, covered, rows, "never written");
  }
  if (problems.empty()) return {};
  std::string msg = "dump " + path + " is incomplete and was not kept: ";
  const std::size_t shown = std::min<std::size_t>(problems.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) msg += (i ? "; " : "") + problems[i];
  if (problems.size() > shown) msg += "; and " + std::to_string(problems.size() - shown) + " more";
  return msg;
}

DumpWriter::DumpWriter(MPI_Comm comm, const std::string& path, bool force) : impl_(new Impl) {
  Impl& im = *impl_;
  // A private communicator keeps our collectives apart from whatever the caller has in flight.
  MPI_Comm_dup(comm, &im.comm);
  MPI_Comm_rank(im.comm, &im.rank);
  MPI_Comm_size(im.comm, &im.size);
  im.path = path;
  im.force = force;
  H5QuietErrors quiet;

  // Rank 0 creates a unique temporary exclusively (never through a symlink, never one that
  // another run is writing) and every rank opens that name through HDF5.
  std::string err;
  if (!same_on_all_ranks(im.comm, "open|" + path + "|" + (force ? "1" : "0"))) {
    err = "DumpWriter(" + path + "): ranks passed different paths or force flags";
  } else if (im.rank == 0) {
    err = validate_target(path, force);
    if (err.empty()) {
      try {
        im.out = std::make_unique<OutputFile>(path, force);
        im.out->close_descriptor();
        im.tmp = im.out->temp_path();
      } catch (const std::exception& e) {
        im.out.reset();
        err = e.what();
      }
    }
  }
  err = bcast_string(im.comm, err);
  if (!err.empty()) {
    im.out.reset();
    MPI_Comm_free(&im.comm);
    throw DumpError(err);
  }
  im.tmp = bcast_string(im.comm, im.tmp);

  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_mpio(fapl.get(), im.comm, MPI_INFO_NULL);
  // The 1.8 object format stores attributes above 64 KiB (the deck text) densely; without it
  // such an attribute fails. Capping at 1.8 keeps the files readable by any HDF5 since 1.8.
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
  H5Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_obj_track_times(fcpl.get(), false);
  errno = 0;
  im.file = H5Handle(H5Fcreate(im.tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
  const std::string h5err = im.file.valid() ? std::string() : failure_reason(im.tmp, errno);
  const std::string create_err = first_error(im.comm, h5err);
  if (!create_err.empty()) {
    im.file.release();  // a partly opened MPI-IO file cannot be closed by some ranks only
    im.out.reset();     // rank 0: removes the temporary
    MPI_Comm_free(&im.comm);
    throw DumpError("cannot create HDF5 file " + im.tmp + " (directory " + fs::path(im.tmp).parent_path().string() +
                    "): " + create_err);
  }
  im.dxpl = H5Handle(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_dxpl_mpio(im.dxpl.get(), H5FD_MPIO_INDEPENDENT);
}

DumpWriter::~DumpWriter() {
  if (!impl_ || impl_->finished || impl_->comm == MPI_COMM_NULL) return;
  Impl& im = *impl_;
  H5QuietErrors quiet;
  if (im.size == 1) {
    im.free_space_of_temporary();
    im.close_handles();
    im.out.reset();  // removes the temporary
    MPI_Comm_free(&im.comm);
  } else {
    // Unlink first: even if this process is killed next, the partial file is gone.
    im.out.reset();
    im.abandon_handles();
  }
}

void DumpWriter::create_dataset(const std::string& path, const std::vector<std::uint64_t>& dims, DType type) {
  Impl& im = *impl_;
  const std::string what = "create_dataset(" + path + ")";
  im.check_open(what);
  H5QuietErrors quiet;
  const std::string p = normalize_object_path(path, what);
  im.check_same(what, "dataset|" + p + "|" + dims_text(dims) + "|" + to_string(type));
  if (p == "/") throw DumpError(what + ": the root group cannot be a dataset");
  if (im.by_path.count(p)) throw DumpError(what + ": dataset " + p + " already exists in " + im.path);
  if (im.groups.count(p)) throw DumpError(what + ": " + p + " is already a group in " + im.path);
  im.ensure_groups(parent_of(p), what);

  std::vector<hsize_t> hd(dims.begin(), dims.end());
  H5Handle space(
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(hd.size()), hd.data(), nullptr),
      H5Sclose);
  if (!space.valid()) throw DumpError(what + ": invalid shape " + dims_text(dims) + ": " + h5_error_text());
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
  // Parallel HDF5 allocates at creation (collective) so that later raw writes touch no
  // metadata and may be independent. No fill pass: it would write every byte twice, and
  // close() proves every row was written anyway.
  H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  H5Pset_obj_track_times(dcpl.get(), false);
  H5Handle d(H5Dcreate2(im.file.get(), p.c_str(), file_type(type), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
             H5Dclose);
  if (!d.valid())
    throw DumpError(what + ": cannot create " + to_string(type) + " " + dims_text(dims) + " in " + im.tmp + ": " +
                    h5_error_text());
  im.by_path[p] = im.datasets.size();
  im.datasets.push_back(Impl::Dataset{p, dims, type, std::move(d)});
}

void DumpWriter::set_attribute(const std::string& obj_path, const std::string& name, const std::string& value) {
  H5QuietErrors quiet;
  H5Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  // Fixed-length strings cannot have size 0; an empty value is stored as one NUL byte.
  const std::string buf = value.empty() ? std::string(1, '\0') : value;
  H5Tset_size(t.get(), buf.size());
  H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  impl_->write_attribute(obj_path, name, t.get(), t.get(), buf.data(), "s|" + value);
}

void DumpWriter::set_attribute(const std::string& obj_path, const std::string& name, double value) {
  H5QuietErrors quiet;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  impl_->write_attribute(obj_path, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, "d|" + std::to_string(bits));
}

void DumpWriter::set_attribute(const std::string& obj_path, const std::string& name, long long value) {
  H5QuietErrors quiet;
  impl_->write_attribute(obj_path, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &value, "i|" + std::to_string(value));
}

void DumpWriter::write_rows(const std::string& path, std::uint64_t row0, std::uint64_t nrows, const void* host_data,
                            DType type) {
  Impl& im = *impl_;
  const std::string what = "write_rows(" + path + ")";
  im.check_open(what);
  H5QuietErrors quiet;
  const std::string p = normalize_object_path(path, what);
  const auto it = im.by_path.find(p);
  if (it == im.by_path.end())
    throw DumpError(what + ": no dataset " + p + " in " + im.path + "; create_dataset it first");
  Impl::Dataset& d = im.datasets[it->second];
  if (type != d.type)
    throw DumpError(what + ": buffer holds " + to_string(type) + " but dataset " + p + " is " + to_string(d.type));
  const std::uint64_t rows = d.dims.empty() ? 1 : d.dims[0];
  if (row0 > rows || nrows > rows - row0)
    throw DumpError(what + ": rows [" + std::to_string(row0) + ", " + std::to_string(row0 + nrows) +
                    ") outside dataset " + p + " " + dims_text(d.dims) + " of " + std::to_string(rows) + " rows");
  if (nrows == 0) return;
  if (host_data == nullptr) throw DumpError(what + ": null host buffer");

  herr_t status = 0;
  errno = 0;
  if (d.dims.empty()) {
    status = H5Dwrite(d.id.get(), memory_type(type), H5S_ALL, H5S_ALL, im.dxpl.get(), host_data);
  } else {
    std::vector<hsize_t> start(d.dims.size(), 0), count(d.dims.begin(), d.dims.end());
    start[0] = row0;
    count[0] = nrows;
    H5Handle fspace(H5Dget_space(d.id.get()), H5Sclose);
    H5Handle mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
    status = H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    if (status >= 0)
      status = H5Dwrite(d.id.get(), memory_type(type), mspace.get(), fspace.get(), im.dxpl.get(), host_data);
  }
  if (status < 0)
    throw DumpError(what + ": cannot write rows [" + std::to_string(row0) + ", " + std::to_string(row0 + nrows) +
                    ") to " + im.tmp + ": " + failure_reason(im.tmp, errno));
  im.writes.insert(im.writes.end(), {static_cast<std::uint64_t>(it->second), row0, nrows});
}

void DumpWriter::close() {
  Impl& im = *impl_;
  if (im.finished) return;
  H5QuietErrors quiet;

  // Gather every rank's write records on rank 0 to prove each row was written exactly once.
  int n_local = static_cast<int>(im.writes.size());
  std::vector<int> counts(im.rank == 0 ? im.size : 0), displs;
  MPI_Gather(&n_local, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, im.comm);
  std::vector<std::uint64_t> all_writes;
  if (im.rank == 0) {
    displs.resize(im.size, 0);
    for (int r = 1; r < im.size; ++r) displs[r] = displs[r - 1] + counts[r - 1];
    all_writes.resize(im.size ? static_cast<std::size_t>(displs.back() + counts.back()) : 0);
  }
  MPI_Gatherv(im.writes.data(), n_local, MPI_UINT64_T, all_writes.data(), counts.data(), displs.data(), MPI_UINT64_T, 0,
              im.comm);
  std::string err = im.rank == 0 ? im.coverage_problems(all_writes) : std::string();

  // Flush first (collective, checked) so that a full file system shows up here, with the file
  // still open, rather than in a failed H5Fclose that HDF5 would repeat, and crash in, at
  // MPI_Finalize. After a failed flush the temporary is emptied so that the close succeeds.
  errno = 0;
  std::string local = H5Fflush(im.file.get(), H5F_SCOPE_GLOBAL) < 0 ? failure_reason(im.tmp, errno) : std::string();
  std::string io_err = first_error(im.comm, local);
  if (!io_err.empty()) {
    im.free_space_of_temporary();
    MPI_Barrier(im.comm);
  }
  errno = 0;
  local = im.close_handles() ? std::string() : failure_reason(im.tmp, errno);
  const std::string close_err = first_error(im.comm, local);
  if (io_err.empty()) io_err = close_err;
  im.finished = true;
  if (im.rank == 0) {
    if (err.empty() && !io_err.empty()) err = "cannot write HDF5 file " + im.tmp + " (dump " + im.path + "): " + io_err;
    if (err.empty()) {
      try {
        im.out->commit();  // fsync, then rename; refused if `path` appeared meanwhile and !force
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    im.out.reset();  // removes the temporary unless committed
  }
  err = bcast_string(im.comm, err);  // also the barrier: the file is in place for everyone
  MPI_Comm_free(&im.comm);
  if (!err.empty()) throw DumpError(err);
}

void DumpWriter::discard_group(const std::string& group) {
  Impl& im = *impl_;
  const std::string what = "discard_group(" + group + ")";
  im.check_open(what);
  H5QuietErrors quiet;
  const std::string g = normalize_object_path(group, what);
  im.check_same(what, "discard|" + g);
  if (g == "/") throw DumpError(what + ": the root group cannot be discarded");
  if (!im.groups.count(g)) return;  // never created: nothing to remove
  const std::string prefix = g + "/";
  for (auto& d : im.datasets) {
    if (d.discarded || d.path.compare(0, prefix.size(), prefix) != 0) continue;
    d.id.reset();
    d.discarded = true;
    im.by_path.erase(d.path);
  }
  for (auto it = im.groups.begin(); it != im.groups.end();) {
    it = (*it == g || it->compare(0, prefix.size(), prefix) == 0) ? im.groups.erase(it) : std::next(it);
  }
  if (H5Ldelete(im.file.get(), g.c_str(), H5P_DEFAULT) < 0)
    throw DumpError(what + ": cannot remove group " + g + " from " + im.tmp + ": " + h5_error_text());
}

void DumpWriter::close_stopped(const std::string& reason, long long completed_steps,
                               const std::vector<std::string>& incomplete_groups) {
  for (const auto& g : incomplete_groups) discard_group(g);
  set_attribute("/meta", "stopped_early", 1LL);
  set_attribute("/meta", "stop_reason", reason);
  set_attribute("/meta", "completed_steps", completed_steps);
  close();
}

const std::string& DumpWriter::path() const {
  return impl_->path;
}
std::string DumpWriter::temp_path() const {
  return impl_->tmp;
}

}  // namespace minipipe::io

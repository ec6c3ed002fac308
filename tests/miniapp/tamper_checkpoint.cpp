// Test tool: damages a checkpoint the way a crash, a hand edit or a mixed copy would, so the
// restart tests can show it is refused. Usage:
//   tamper_checkpoint flip FILE DATASET          change one element of DATASET (one bit)
//   tamper_checkpoint mix FILE DATASET OTHER     DATASET's values from checkpoint OTHER
//   tamper_checkpoint drop-manifest FILE         delete /manifest's tensor list
#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int fail(const std::string& why) {
  std::fprintf(stderr, "tamper_checkpoint: %s\n", why.c_str());
  return 2;
}

// The dataset's raw bytes (native type of the file's type).
bool read_bytes(hid_t file, const char* name, std::vector<char>& out, hid_t& mem_type) {
  const hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
  if (d < 0) return false;
  const hid_t t = H5Dget_type(d);
  mem_type = H5Tget_native_type(t, H5T_DIR_ASCEND);
  const hid_t s = H5Dget_space(d);
  const hssize_t n = H5Sget_simple_extent_npoints(s);
  out.resize(static_cast<std::size_t>(n) * H5Tget_size(mem_type));
  const herr_t rc = H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Sclose(s), H5Tclose(t), H5Dclose(d);
  return rc >= 0;
}

bool write_bytes(hid_t file, const char* name, const std::vector<char>& in, hid_t mem_type) {
  const hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
  if (d < 0) return false;
  const herr_t rc = H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, in.data());
  H5Dclose(d);
  return rc >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: tamper_checkpoint flip|mix|drop-manifest FILE [DATASET [OTHER]]");
  const std::string mode = argv[1];
  const hid_t file = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return fail(std::string("cannot open ") + argv[2]);
  int rc = 0;
  if (mode == "drop-manifest") {
    if (H5Adelete_by_name(file, "/manifest", "tensors", H5P_DEFAULT) < 0) rc = fail("no /manifest tensors");
  } else if ((mode == "flip" && argc == 4) || (mode == "mix" && argc == 5)) {
    std::vector<char> bytes;
    hid_t type = -1;
    if (mode == "flip") {
      if (!read_bytes(file, argv[3], bytes, type) || bytes.empty()) return fail(std::string("cannot read ") + argv[3]);
      bytes[0] ^= 1;  // the lowest bit of the first element (little-endian)
    } else {
      const hid_t other = H5Fopen(argv[4], H5F_ACC_RDONLY, H5P_DEFAULT);
      if (other < 0 || !read_bytes(other, argv[3], bytes, type)) return fail(std::string("cannot read ") + argv[4]);
      H5Fclose(other);
    }
    if (!write_bytes(file, argv[3], bytes, type)) rc = fail(std::string("cannot write ") + argv[3]);
    H5Tclose(type);
  } else {
    rc = fail("unknown mode or wrong argument count: " + mode);
  }
  H5Fclose(file);
  return rc;
}

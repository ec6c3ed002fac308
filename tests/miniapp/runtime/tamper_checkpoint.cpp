// Test tool: damages a checkpoint the way a crash, a hand edit or a mixed copy would, so the
// restart tests can show it is refused. Usage:
//   tamper_checkpoint flip FILE DATASET          change one element of DATASET (one bit)
//   tamper_checkpoint mix FILE DATASET OTHER     DATASET's values from checkpoint OTHER
//   tamper_checkpoint drop-manifest FILE         delete /manifest's tensor list
//   tamper_checkpoint set-int FILE OBJECT NAME VALUE      rewrite an int64 attribute (e.g. /meta step)
//   tamper_checkpoint set-string FILE OBJECT NAME VALUE   rewrite a string attribute (e.g. /meta deck)
//   tamper_checkpoint edit-string FILE OBJECT NAME OLD NEW  the first OLD in a string attribute becomes NEW
//                                                 ('=' in OLD and NEW stands for a space: step=2)
//   tamper_checkpoint reseal FILE                 recompute /manifest checksum (a forger who knows the
//                                                 format: the restart's range checks must still hold)
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

// Replaces attribute NAME of OBJECT with `value` (int64 or a fixed-length string).
bool set_attribute(hid_t file, const char* object, const char* name, const void* value, hid_t type) {
  if (H5Aexists_by_name(file, object, name, H5P_DEFAULT) > 0 && H5Adelete_by_name(file, object, name, H5P_DEFAULT) < 0)
    return false;
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(file, object, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const bool ok = a >= 0 && H5Awrite(a, type, value) >= 0;
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  return ok;
}

// A fixed- or variable-length string attribute's text ("" when it cannot be read).
std::string string_attribute(hid_t file, const char* object, const char* name) {
  const hid_t a = H5Aopen_by_name(file, object, name, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) return "";
  const hid_t t = H5Aget_type(a);
  std::string out;
  if (H5Tis_variable_str(t) > 0) {
    char* p = nullptr;
    if (H5Aread(a, t, &p) >= 0 && p) out = p;
    if (p) H5free_memory(p);
  } else {
    std::vector<char> buf(H5Tget_size(t) + 1, '\0');
    if (H5Aread(a, t, buf.data()) >= 0) out = buf.data();
  }
  H5Tclose(t), H5Aclose(a);
  return out;
}

void set_string(hid_t file, const char* object, const char* name, const std::string& text, int& rc) {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, text.empty() ? 1 : text.size());
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  if (!set_attribute(file, object, name, text.c_str(), t)) rc = fail(std::string("cannot set ") + name);
  H5Tclose(t);
}

// FNV-1a 64 of the manifest's "step N\n", metadata and tensor lines, as 16 hex digits (the format
// docs/dump-format.md describes; written out here, not taken from the code under test).
std::string seal(long long step, const std::string& meta, const std::string& tensors) {
  const std::string all = "step " + std::to_string(step) + "\n" + meta + tensors;
  unsigned long long h = 0xcbf29ce484222325ULL;
  for (unsigned char c : all) h = (h ^ c) * 0x100000001b3ULL;
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", h);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: tamper_checkpoint flip|mix|drop-manifest|set-int|set-string FILE ...");
  const std::string mode = argv[1];
  const hid_t file = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return fail(std::string("cannot open ") + argv[2]);
  int rc = 0;
  if (mode == "drop-manifest") {
    if (H5Adelete_by_name(file, "/manifest", "tensors", H5P_DEFAULT) < 0) rc = fail("no /manifest tensors");
  } else if (mode == "set-int" && argc == 6) {
    const long long v = std::stoll(argv[5]);
    if (!set_attribute(file, argv[3], argv[4], &v, H5T_NATIVE_LLONG)) rc = fail(std::string("cannot set ") + argv[4]);
  } else if (mode == "set-string" && argc == 6) {
    const std::string text = argv[5];
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, text.empty() ? 1 : text.size());
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    if (!set_attribute(file, argv[3], argv[4], text.c_str(), t)) rc = fail(std::string("cannot set ") + argv[4]);
    H5Tclose(t);
  } else if (mode == "reseal" && argc == 3) {
    long long step = 0;
    const hid_t a = H5Aopen_by_name(file, "/manifest", "step", H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Aread(a, H5T_NATIVE_LLONG, &step) < 0) return fail("no /manifest step");
    H5Aclose(a);
    set_string(file, "/manifest", "checksum",
               seal(step, string_attribute(file, "/manifest", "meta"), string_attribute(file, "/manifest", "tensors")),
               rc);
  } else if (mode == "edit-string" && argc == 7) {
    std::string text = string_attribute(file, argv[3], argv[4]), from = argv[5], to = argv[6];
    for (std::string* s : {&from, &to})
      for (char& c : *s) c = c == '=' ? ' ' : c;
    const auto at = text.find(from);
    if (at == std::string::npos) return fail("no '" + from + "' in " + argv[4]);
    text.replace(at, from.size(), to);
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, text.empty() ? 1 : text.size());
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    if (!set_attribute(file, argv[3], argv[4], text.c_str(), t)) rc = fail(std::string("cannot set ") + argv[4]);
    H5Tclose(t);
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

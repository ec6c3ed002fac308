// minipipe_make_tokens: writes a small HDF5 token file (int32 [N, T+1], right-padded with -1) for
// the end-to-end test of data.source = hdf5. The rows follow a fixed rule so the data is learnable.
#include <hdf5.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: minipipe_make_tokens OUT.h5 DATASET ROWS SEQ_LEN VOCAB\n");
    return 2;
  }
  const std::string out = argv[1], dataset = argv[2];
  const long rows = std::atol(argv[3]), T = std::atol(argv[4]), V = std::atol(argv[5]);
  if (rows <= 0 || T <= 1 || V <= 1) {
    std::fprintf(stderr, "minipipe_make_tokens: ROWS >= 1, SEQ_LEN >= 2 and VOCAB >= 2 required\n");
    return 2;
  }
  // Row r: x[0] = r mod V, x[t+1] = (3 x[t] + 1 + r) mod V; row r keeps T+1 - (r mod 3) tokens,
  // the rest is -1 (padding), so rows of every length and some padding reach the run.
  std::vector<int> data(static_cast<std::size_t>(rows * (T + 1)), -1);
  for (long r = 0; r < rows; ++r) {
    const long len = T + 1 - r % 3;
    long x = r % V;
    for (long t = 0; t < len; ++t) {
      data[r * (T + 1) + t] = static_cast<int>(x);
      x = (3 * x + 1 + r) % V;
    }
  }
  const hid_t file = H5Fcreate(out.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    std::fprintf(stderr, "minipipe_make_tokens: cannot create %s (does it exist already?)\n", out.c_str());
    return 2;
  }
  const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(T + 1)};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t dset = H5Dcreate2(file, dataset.c_str(), H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const herr_t w = dset < 0 ? -1 : H5Dwrite(dset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  const bool ok = dset >= 0 && w >= 0 && H5Dclose(dset) >= 0 && H5Sclose(space) >= 0 && H5Fclose(file) >= 0;
  if (!ok) {
    std::fprintf(stderr, "minipipe_make_tokens: writing %s:%s failed\n", out.c_str(), dataset.c_str());
    return 3;
  }
  return 0;
}

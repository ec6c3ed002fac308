// Training tokens from an HDF5 file (data.source = hdf5): rows [N, T+1] with -1 padding become
// tokens/targets of the global batch; bad files are rejected naming key, file and dataset.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdio>
#include <string>
#include <vector>

#include "miniapp/model/config.hpp"
#include "miniapp/model/data.hpp"
#include "miniapp/model/model.hpp"

using namespace minipipe;

namespace {

std::string write_tokens(const std::string& name, const std::vector<int>& v, hsize_t rows, hsize_t cols) {
  const std::string path = ::testing::TempDir() + name;
  std::remove(path.c_str());
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {rows, cols};
  const hid_t s = H5Screate_simple(2, dims, nullptr);
  const hid_t d = H5Dcreate2(f, "tokens", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(d);
  H5Sclose(s);
  H5Fclose(f);
  return path;
}

Deck deck_for(const std::string& path) {
  Deck d;
  d.set_from_text("model.vocab", "16");
  d.set_from_text("model.seq_len", "4");
  d.set_from_text("data.source", "hdf5");
  d.set_from_text("data.path", path);
  return d;
}

}  // namespace

TEST(DataHdf5, RowsBecomeTokensAndTargetsWithPadding) {
  // Two rows of T+1 = 5 tokens; the second is 3 tokens long and right-padded with -1.
  const std::string path = write_tokens("tokens_ok.h5", {1, 2, 3, 4, 5, 7, 8, 9, -1, -1}, 2, 5);
  const Deck d = deck_for(path);
  DataSource src(d, model_shape_from_deck(d));
  const Batch b = src.batch(0, 3);  // rows 0, 1, then row 0 again (the file wraps around)
  EXPECT_EQ(b.tokens, (std::vector<int>{1, 2, 3, 4, 7, 8, 9, 0, 1, 2, 3, 4}));
  EXPECT_EQ(b.targets, (std::vector<int>{2, 3, 4, 5, 8, 9, -1, -1, 2, 3, 4, 5}));
  EXPECT_EQ(b.valid_tokens(), 4 + 2 + 4);
}

TEST(DataHdf5, BadFilesNameKeyFileAndDataset) {
  const std::string wrong_width = write_tokens("tokens_wide.h5", std::vector<int>(12, 1), 2, 6);
  const std::string out_of_range = write_tokens("tokens_range.h5", {1, 2, 3, 4, 99}, 1, 5);
  auto message = [](const std::string& path) {
    try {
      const Deck d = deck_for(path);
      DataSource src(d, model_shape_from_deck(d));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string w = message(wrong_width);
  EXPECT_NE(w.find("data.dataset"), std::string::npos) << w;
  EXPECT_NE(w.find("[N, 5]"), std::string::npos) << w;
  const std::string r = message(out_of_range);
  EXPECT_NE(r.find("99"), std::string::npos) << r;
  EXPECT_NE(r.find("model.vocab"), std::string::npos) << r;
  const std::string missing = message("/nonexistent/tokens.h5");
  EXPECT_NE(missing.find("data.path"), std::string::npos) << missing;
  EXPECT_NE(missing.find("/nonexistent/tokens.h5"), std::string::npos) << missing;
}

// Token files are range-checked in the width they are stored in, before any narrowing: an int64
// token of 2^32 + 5 must not be read as 5 (which model.vocab would then accept).
TEST(DataHdf5, WideTokensAreRefusedBeforeNarrowing) {
  const std::string path = ::testing::TempDir() + "tokens_int64.h5";
  std::remove(path.c_str());
  const std::vector<long long> v = {1, 2, 3, 4, 4294967301LL};
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {1, 5};
  const hid_t s = H5Screate_simple(2, dims, nullptr);
  const hid_t d = H5Dcreate2(f, "tokens", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(d), H5Sclose(s), H5Fclose(f);
  std::string msg;
  try {
    const Deck deck = deck_for(path);
    DataSource src(deck, model_shape_from_deck(deck));
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("data.path"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokens_int64.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4294967301"), std::string::npos) << msg;
}

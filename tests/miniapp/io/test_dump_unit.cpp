// Single-rank tests of the dump writer and reader: every bit survives a round trip, the file
// types are fixed little-endian and contiguous, misuse and bad token files give named errors.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "io_test_support.hpp"
#include "miniapp/io/dump_reader.hpp"

namespace {

using namespace iotest;
using minipipe::io::DType;
using minipipe::io::DumpError;
using minipipe::io::DumpLevel;
using minipipe::io::DumpReader;
using minipipe::io::DumpWriter;
using minipipe::io::ReadError;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(DumpLevelTest, ParsesEveryLevelAndNamesAllowedValues) {
  EXPECT_EQ(minipipe::io::parse_dump_level("none"), DumpLevel::none);
  EXPECT_EQ(minipipe::io::parse_dump_level("loss"), DumpLevel::loss);
  EXPECT_EQ(minipipe::io::parse_dump_level("grads"), DumpLevel::grads);
  EXPECT_EQ(minipipe::io::parse_dump_level("full"), DumpLevel::full);
  EXPECT_EQ(minipipe::io::parse_dump_level("kernels"), DumpLevel::kernels);
  for (auto l : {DumpLevel::none, DumpLevel::loss, DumpLevel::grads, DumpLevel::full, DumpLevel::kernels})
    EXPECT_EQ(minipipe::io::parse_dump_level(minipipe::io::to_string(l)), l);
  const std::string msg = error_of([] { minipipe::io::parse_dump_level("Full"); });
  EXPECT_EQ(msg, "invalid dump level \"Full\"; allowed values: none, loss, grads, full, kernels");
  EXPECT_THROW(minipipe::io::parse_dump_level(""), DumpError);
}

TEST(DumpWriterTest, RoundTripKeepsEveryBitWithFixedLittleEndianContiguousTypes) {
  const fs::path p = outdir() / "roundtrip.h5";
  // Values whose bits a conversion or a careless copy would change.
  std::vector<float> f = {0.0f,
                          -0.0f,
                          1.0f / 3.0f,
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::max(),
                          std::nextafter(1.0f, 2.0f),
                          -1.5e-30f};
  std::uint32_t nan_bits = 0x7fc01234u;  // a NaN with a payload
  float nan_payload;
  std::memcpy(&nan_payload, &nan_bits, 4);
  f.push_back(nan_payload);
  f.push_back(2.0f);
  std::vector<double> d = {0.1, -0.0, std::numeric_limits<double>::denorm_min(), 1e308, -2.5};
  std::vector<std::int32_t> t = {std::numeric_limits<std::int32_t>::min(), -1, 0, 50256,
                                 std::numeric_limits<std::int32_t>::max(), 7};
  {
    DumpWriter w(MPI_COMM_WORLD, p, false);
    EXPECT_EQ(w.temp_path().rfind(p.string() + ".tmp.", 0), 0u) << w.temp_path();
    w.create_dataset("/f", {5, 2}, DType::f32);
    w.create_dataset("/g/d", {5}, DType::f64);
    w.create_dataset("/g/h/t", {2, 3}, DType::i32);
    w.create_dataset("/s", {}, DType::f64);
    EXPECT_TRUE(fs::exists(w.temp_path()));
    EXPECT_FALSE(fs::exists(p));             // only the temporary name exists until close()
    w.write_rows("/f", 3, 2, f.data() + 6);  // out of order, several pieces
    w.write_rows("/f", 0, 3, f.data());
    w.write_rows("/g/d", 0, 5, d.data());
    w.write_rows("/g/h/t", 1, 1, t.data() + 3);
    w.write_rows("/g/h/t", 0, 1, t.data());
    const double s = -7.25;
    w.write_rows("/s", 0, 1, &s);
    w.close();
    w.close();  // idempotent
  }
  ASSERT_TRUE(fs::exists(p));
  EXPECT_TRUE(leftover_temporaries(p).empty());

  const DumpReader r(p);
  std::vector<std::uint64_t> dims;
  const auto f2 = r.read_f32("/f", dims);
  EXPECT_EQ(dims, (std::vector<std::uint64_t>{5, 2}));
  ASSERT_EQ(f2.size(), f.size());
  EXPECT_EQ(std::memcmp(f2.data(), f.data(), f.size() * 4), 0);
  const auto d2 = r.read_f64("g/d", dims);
  ASSERT_EQ(d2.size(), d.size());
  EXPECT_EQ(std::memcmp(d2.data(), d.data(), d.size() * 8), 0);
  EXPECT_EQ(r.read_i32("/g/h/t", dims), t);
  EXPECT_EQ(dims, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(r.read_f64("/s", dims), std::vector<double>{-7.25});
  EXPECT_TRUE(dims.empty());
  EXPECT_TRUE(r.has_dataset("/g/h/t"));
  EXPECT_FALSE(r.has_dataset("/g/h"));  // a group

  // Check the on-disk representation with HDF5 directly.
  hid_t file = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const std::pair<const char*, hid_t> expect[] = {
      {"/f", H5T_IEEE_F32LE}, {"/g/d", H5T_IEEE_F64LE}, {"/g/h/t", H5T_STD_I32LE}, {"/s", H5T_IEEE_F64LE}};
  for (const auto& [name, type] : expect) {
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    hid_t ft = H5Dget_type(ds);
    hid_t dcpl = H5Dget_create_plist(ds);
    EXPECT_GT(H5Tequal(ft, type), 0) << name;
    EXPECT_EQ(H5Pget_layout(dcpl), H5D_CONTIGUOUS) << name;
    H5Pclose(dcpl);
    H5Tclose(ft);
    H5Dclose(ds);
  }
  H5Fclose(file);
}

TEST(DumpWriterTest, AttributesRoundTripOnGroupsAndDatasetsAndCanBeReplaced) {
  const fs::path p = outdir() / "attrs.h5";
  {
    DumpWriter w(MPI_COMM_WORLD, p, false);
    w.create_dataset("/step_0000/loss", {}, DType::f64);
    w.set_attribute("/meta", "schedule", "gpipe");
    w.set_attribute("/meta", "schedule", "zb-h1");  // replaced, not duplicated
    w.set_attribute("/meta", "deck", big_text());
    w.set_attribute("/meta", "n_layer", 12LL);
    w.set_attribute("/meta", "neg", -5LL);
    w.set_attribute("/meta", "eps", 1e-5);
    w.set_attribute("/meta", "blank", std::string());
    w.set_attribute("/", "root_note", "at the root");
    w.set_attribute("/step_0000/loss", "unit", "nats");
    w.set_attribute("/a/b/c", "created", 1LL);  // missing groups are created
    const double loss = 3.25;
    w.write_rows("/step_0000/loss", 0, 1, &loss);
    w.close();
  }
  const DumpReader r(p);
  EXPECT_EQ(r.string_attribute("/meta", "schedule"), "zb-h1");
  EXPECT_EQ(r.string_attribute("/meta", "deck"), big_text());
  EXPECT_EQ(r.int_attribute("/meta", "n_layer"), 12);
  EXPECT_EQ(r.int_attribute("/meta", "neg"), -5);
  EXPECT_EQ(r.double_attribute("/meta", "eps"), 1e-5);
  EXPECT_EQ(r.string_attribute("/meta", "blank"), "");
  EXPECT_EQ(r.string_attribute("/", "root_note"), "at the root");
  EXPECT_EQ(r.string_attribute("/step_0000/loss", "unit"), "nats");
  EXPECT_EQ(r.int_attribute("/a/b/c", "created"), 1);
  EXPECT_EQ(r.attribute_names("/meta"),
            (std::vector<std::string>{"blank", "deck", "eps", "n_layer", "neg", "schedule"}));
  EXPECT_EQ(r.attribute_text("/meta", "n_layer"), "int:12");
  EXPECT_EQ(r.attribute_text("/meta", "eps"), "float:1.0000000000000001e-05");
  EXPECT_TRUE(contains(error_of([&] { r.int_attribute("/meta", "schedule"); }), "is not a scalar integer"));
  EXPECT_TRUE(contains(error_of([&] { r.string_attribute("/meta", "nope"); }), "no attribute nope on /meta"));
}

TEST(DumpWriterTest, MisuseIsReportedWithDatasetAndValues) {
  const fs::path p = outdir() / "misuse.h5";
  DumpWriter w(MPI_COMM_WORLD, p, false);
  w.create_dataset("/x", {4, 3}, DType::f32);
  const std::vector<double> dbuf(12, 1.0);
  const std::vector<float> fbuf(12, 1.0f);
  EXPECT_EQ(error_of([&] { w.write_rows("/x", 0, 1, dbuf.data()); }),
            "write_rows(/x): buffer holds f64 but dataset /x is f32");
  EXPECT_EQ(error_of([&] { w.write_rows("/x", 3, 2, fbuf.data()); }),
            "write_rows(/x): rows [3, 5) outside dataset /x [4,3] of 4 rows");
  EXPECT_TRUE(contains(error_of([&] { w.write_rows("/y", 0, 1, fbuf.data()); }), "no dataset /y in " + p.string()));
  EXPECT_TRUE(
      contains(error_of([&] { w.write_rows("/x", 0, 1, static_cast<const float*>(nullptr)); }), "null host buffer"));
  EXPECT_TRUE(contains(error_of([&] { w.create_dataset("x", {1}, DType::f32); }), "dataset /x already exists"));
  EXPECT_TRUE(contains(error_of([&] { w.create_dataset("/x/sub", {1}, DType::f32); }), "/x is a dataset, not a group"));
  EXPECT_TRUE(contains(error_of([&] { w.create_dataset("/a//b", {1}, DType::f32); }), "empty"));
  EXPECT_TRUE(contains(error_of([&] { w.create_dataset("/a/", {1}, DType::f32); }), "ends with '/'"));
  EXPECT_TRUE(contains(error_of([&] { w.create_dataset("/", {1}, DType::f32); }), "root group"));
  w.create_dataset("/g/leaf", {2}, DType::i32);
  EXPECT_TRUE(contains(error_of([&] { w.create_dataset("/g", {1}, DType::f32); }), "/g is already a group"));
  // The failed calls changed nothing: the dump completes normally.
  w.write_rows("/x", 0, 4, fbuf.data());
  const std::int32_t leaf[2] = {1, 2};
  w.write_rows("/g/leaf", 0, 2, leaf);
  w.write_rows("/x", 2, 0, fbuf.data());  // empty write: allowed, no effect
  w.close();
  EXPECT_TRUE(contains(error_of([&] { w.write_rows("/x", 0, 1, fbuf.data()); }), "already closed"));
  EXPECT_TRUE(fs::exists(p));
}

TEST(DumpWriterTest, SingleRankDestructorClosesAndDeletesTemporary) {
  const fs::path p = outdir() / "dropped.h5";
  {
    DumpWriter w(MPI_COMM_WORLD, p, false);
    w.create_dataset("/x", {2}, DType::f32);
    EXPECT_TRUE(fs::exists(w.temp_path()));
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(leftover_temporaries(p).empty());
  // The HDF5 file was really closed: the same name can be written again at once.
  DumpWriter w(MPI_COMM_WORLD, p, false);
  w.create_dataset("/x", {1}, DType::f32);
  const float v = 1.0f;
  w.write_rows("/x", 0, 1, &v);
  w.close();
  EXPECT_TRUE(fs::exists(p));
}

TEST(DumpWriterTest, RejectsDirectoryTargets) {
  EXPECT_TRUE(
      contains(error_of([] { DumpWriter w(MPI_COMM_WORLD, outdir().string(), true); }), "is an existing directory"));
  EXPECT_TRUE(
      contains(error_of([] { DumpWriter w(MPI_COMM_WORLD, outdir().string() + "/", true); }), "names a directory"));
  EXPECT_EQ(error_of([] { DumpWriter w(MPI_COMM_WORLD, "", true); }), "dump path is empty");
}

// Token files come from elsewhere: any integer type is accepted if its values fit in int32.
void write_raw(const fs::path& p, const char* name, hid_t file_type, hid_t mem_type, const void* data,
               std::vector<hsize_t> dims) {
  hid_t f = fs::exists(p) ? H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)
                          : H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t s = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t d = H5Dcreate2(f, name, file_type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Sclose(s);
  H5Fclose(f);
}

TEST(ReadI32Test, ConvertsIntegerTypesAndNamesFileAndDatasetOnErrors) {
  const fs::path p = outdir() / "tokens.h5";
  const std::int64_t ok64[4] = {0, -1, 50256, 2147483647};
  const std::int64_t bad64[2] = {1, 2147483648LL};
  const std::uint16_t u16[3] = {65535, 0, 9};
  const float fl[2] = {1.0f, 2.0f};
  write_raw(p, "ok64", H5T_STD_I64BE, H5T_NATIVE_INT64, ok64, {2, 2});
  write_raw(p, "bad64", H5T_STD_I64LE, H5T_NATIVE_INT64, bad64, {2});
  write_raw(p, "u16", H5T_STD_U16LE, H5T_NATIVE_UINT16, u16, {3});
  write_raw(p, "fl", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, fl, {2});

  std::vector<std::uint64_t> dims;
  EXPECT_EQ(minipipe::io::read_i32(p, "ok64", dims), (std::vector<std::int32_t>{0, -1, 50256, 2147483647}));
  EXPECT_EQ(dims, (std::vector<std::uint64_t>{2, 2}));
  EXPECT_EQ(minipipe::io::read_i32(p, "/u16", dims), (std::vector<std::int32_t>{65535, 0, 9}));
  EXPECT_EQ(error_of([&] { minipipe::io::read_i32(p, "bad64", dims); }),
            p.string() + ", dataset /bad64: element 1 = 2147483648 does not fit in int32");
  EXPECT_EQ(error_of([&] { minipipe::io::read_i32(p, "fl", dims); }),
            p.string() + ", dataset /fl: has type f32; expected an integer type");
  EXPECT_EQ(error_of([&] { minipipe::io::read_i32(p, "tokens", dims); }), p.string() + ": no dataset /tokens");
  const fs::path missing = outdir() / "missing.h5";
  EXPECT_EQ(error_of([&] { minipipe::io::read_i32(missing, "x", dims); }),
            "cannot open " + missing.string() + ": no such file");
  const fs::path junk = outdir() / "junk.h5";
  write_text(junk, "this is not HDF5\n");
  EXPECT_EQ(error_of([&] { minipipe::io::read_i32(junk, "x", dims); }), junk.string() + " is not an HDF5 file");
  EXPECT_THROW(minipipe::io::read_i32(junk, "x", dims), ReadError);
}

}  // namespace

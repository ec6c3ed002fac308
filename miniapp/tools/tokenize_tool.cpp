// `minipipe tokenize`: checks the inputs and the output path up front, turns each file into
// byte-level rows and writes them through io::OutputFile (a unique temporary, renamed when complete).
#include "miniapp/tools/tokenize_tool.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "miniapp/io/h5_handle.hpp"
#include "miniapp/io/output_file.hpp"
#include "miniapp/io/output_paths.hpp"
#include "miniapp/tools/command.hpp"

namespace minipipe {

namespace fs = std::filesystem;
using io::detail::h5_error_text;
using io::detail::H5Handle;
using io::detail::H5QuietErrors;

namespace {

constexpr int kVocab = 256;
constexpr int kMaxSeqLen = 1 << 20;

// Bad user input (exit 2) versus a failure while writing (exit 3).
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct WriteFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string hex_byte(unsigned char b) {
  char s[8];
  std::snprintf(s, sizeof(s), "0x%02X", b);
  return s;
}

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::status(path, ec))) throw BadInput("input '" + path + "' is not a readable regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput("cannot open input '" + path + "': " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw BadInput("cannot read input '" + path + "': " + std::strerror(errno));
  return bytes;
}

void write_int_attribute(hid_t obj, const char* name, long long value, const std::string& file) {
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(obj, name, H5T_NATIVE_LLONG, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid() || H5Awrite(attr.get(), H5T_NATIVE_LLONG, &value) < 0 || !attr.reset())
    throw WriteFailure("cannot write attribute '" + std::string(name) + "' in " + file + ": " + h5_error_text());
}

void write_text_attribute(hid_t obj, const char* name, const std::string& value, const std::string& file) {
  H5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), padded.data()) < 0 || !attr.reset())
    throw WriteFailure("cannot write attribute '" + std::string(name) + "' in " + file + ": " + h5_error_text());
}

// Writes the rows into `tmp`, the empty temporary io::OutputFile created for us (exclusively,
// never through a symlink), and closes it with every step checked.
void write_rows_file(const std::string& tmp, const std::string& dataset, const std::vector<std::int32_t>& rows,
                     std::uint64_t nrows, int seq_len, std::uint64_t documents, const std::string& sources) {
  H5QuietErrors quiet;
  H5Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) throw WriteFailure("cannot create the HDF5 file '" + tmp + "': " + h5_error_text());
  const hsize_t dims[2] = {nrows, static_cast<hsize_t>(seq_len) + 1};
  H5Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
  H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  H5Handle dset(
      H5Dcreate2(file.get(), dataset.c_str(), H5T_STD_I32LE, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  if (!dset.valid())
    throw BadInput("--dataset '" + dataset + "' cannot be created in '" + tmp + "': " + h5_error_text());
  if (H5Dwrite(dset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0)
    throw WriteFailure("cannot write dataset '" + dataset + "' to '" + tmp + "': " + h5_error_text());
  write_int_attribute(dset.get(), "vocab", kVocab, tmp);
  write_int_attribute(dset.get(), "seq_len", seq_len, tmp);
  write_int_attribute(dset.get(), "documents", static_cast<long long>(documents), tmp);
  write_text_attribute(dset.get(), "tokenizer",
                       "UTF-8 bytes as tokens 0..255; one document per input file; row r holds bytes "
                       "[r*seq_len, r*seq_len+seq_len] of its document; -1 pads the last row",
                       tmp);
  write_text_attribute(dset.get(), "sources", sources, tmp);
  if (!dset.reset()) throw WriteFailure("cannot close dataset '" + dataset + "' in '" + tmp + "': " + h5_error_text());
  if (!file.reset()) throw WriteFailure("cannot close '" + tmp + "': " + h5_error_text());
}

}  // namespace

std::size_t first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  auto cont = [&](std::size_t i, unsigned char lo, unsigned char hi) { return i < n && s[i] >= lo && s[i] <= hi; };
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t len = 0;
    bool ok = false;
    if (c <= 0x7F) {
      len = 1, ok = true;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2, ok = cont(i + 1, 0x80, 0xBF);
    } else if (c == 0xE0) {
      len = 3, ok = cont(i + 1, 0xA0, 0xBF) && cont(i + 2, 0x80, 0xBF);
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      len = 3, ok = cont(i + 1, 0x80, 0xBF) && cont(i + 2, 0x80, 0xBF);
    } else if (c == 0xED) {  // U+D800..U+DFFF are surrogates, not characters
      len = 3, ok = cont(i + 1, 0x80, 0x9F) && cont(i + 2, 0x80, 0xBF);
    } else if (c == 0xF0) {
      len = 4, ok = cont(i + 1, 0x90, 0xBF) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF);
    } else if (c >= 0xF1 && c <= 0xF3) {
      len = 4, ok = cont(i + 1, 0x80, 0xBF) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF);
    } else if (c == 0xF4) {  // nothing above U+10FFFF
      len = 4, ok = cont(i + 1, 0x80, 0x8F) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF);
    }
    if (!ok) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::uint64_t append_document_rows(std::string_view bytes, int seq_len, std::vector<std::int32_t>& rows) {
  if (seq_len < 1) throw std::invalid_argument("append_document_rows: seq_len must be positive");
  const std::size_t n = bytes.size(), T = static_cast<std::size_t>(seq_len);
  if (n < 2) return 0;
  const std::size_t nrows = (n - 1 + T - 1) / T;  // ceil((n - 1) / T): n - 1 targets, T per row
  rows.reserve(rows.size() + nrows * (T + 1));
  for (std::size_t r = 0; r < nrows; ++r)
    for (std::size_t j = 0; j <= T; ++j) {
      const std::size_t k = r * T + j;
      rows.push_back(k < n ? static_cast<std::int32_t>(static_cast<unsigned char>(bytes[k])) : -1);
    }
  return nrows;
}

void TokenizeTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("tokenize",
                              "turn UTF-8 text files into byte-level training rows (vocab 256) in an HDF5 file for "
                              "data.source = \"hdf5\"");
  sub->option_defaults()->always_capture_default();
  sub->add_option("files", inputs, "UTF-8 text files; each file is one document")->required();
  sub->add_option("--output,-o", output, "HDF5 file to write (data.path)")->required();
  sub->add_option("--seq-len", seq_len, "tokens per training row T (model.seq_len); rows hold T+1 tokens")
      ->check(CLI::Range(1, kMaxSeqLen));
  sub->add_option("--dataset", dataset, "dataset name in the output (data.dataset)");
  sub->add_flag("--force", force, "overwrite an existing output file");
}

int TokenizeTool::run(std::ostream& out) {
  try {
    // Inputs and the output checked like every other command's (io/output_paths.hpp): regular
    // files, no overwrite without --force, no output on an input, no dangling link.
    std::vector<io::InputSpec> in_specs;
    for (const auto& path : inputs) {
      io::check_input_file("files", path);
      in_specs.push_back({"files", path});
    }
    io::check_outputs({{"--output", output, force, false}}, in_specs);
    std::vector<std::int32_t> rows;
    std::uint64_t nrows = 0, documents = 0, bytes = 0;
    std::string sources;
    for (const auto& path : inputs) {
      const std::string text = read_whole_file(path);
      const std::size_t bad = first_invalid_utf8(text);
      if (bad != std::string_view::npos)
        throw BadInput("input '" + path + "' is not UTF-8 text: byte " +
                       hex_byte(static_cast<unsigned char>(text[bad])) + " at offset " + std::to_string(bad) +
                       " does not start or continue a well-formed character");
      const std::uint64_t r = append_document_rows(text, seq_len, rows);
      if (r == 0) *err << "minipipe tokenize: note: '" << path << "' has fewer than 2 bytes and adds no rows\n";
      nrows += r, bytes += text.size(), ++documents;
      sources += (sources.empty() ? "" : "\n") + fs::path(path).filename().string();
    }
    if (nrows == 0) throw BadInput("the inputs hold no document of at least 2 bytes; nothing to train on");

    // The project's one way to write an output: a unique temporary, committed (fsync, rename that
    // refuses a target that appeared meanwhile unless --force) only when complete.
    io::OutputFile file(output, force);
    file.close_descriptor();
    write_rows_file(file.temp_path(), dataset, rows, nrows, seq_len, documents, sources);
    file.commit();
    out << "tokenize: " << documents << " document(s), " << bytes << " bytes -> " << nrows << " rows of " << seq_len + 1
        << " tokens (vocab " << kVocab << ") in " << output << " dataset " << dataset << "\n";
    return 0;
  } catch (const BadInput& e) {
    return print_error(*err, e.what(), kExitUsage);
  } catch (const io::PathError& e) {
    return print_error(*err, e.what(), kExitUsage);
  } catch (const std::exception& e) {
    return print_error(*err, e.what(), kExitFailure);
  }
}

}  // namespace minipipe

// `minipipe tokenize FILE... --output tokens.h5`: UTF-8 text to byte-level training rows (vocab
// 256) in the int32 [N, seq_len+1] layout that data.source = "hdf5" reads (miniapp/model/data.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace minipipe {

// Offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or std::string_view::npos when all of it is.
std::size_t first_invalid_utf8(std::string_view text);

// Appends the training rows of one document to `rows`, each row seq_len + 1 tokens long.
// Tokens are the document's bytes (0..255). Row r holds bytes [r*seq_len, r*seq_len + seq_len],
// so consecutive rows overlap by one byte and every next-byte target inside the document is
// trained exactly once; the last row is padded with -1, which the data source turns into
// "no target". No row crosses into another document. Returns the number of rows appended
// (0 for a document shorter than two bytes: it has no target).
std::uint64_t append_document_rows(std::string_view bytes, int seq_len, std::vector<std::int32_t>& rows);

struct TokenizeTool {
  CLI::App* sub = nullptr;  // the "tokenize" subcommand, set by attach()

  std::vector<std::string> inputs;
  std::string output;
  std::string dataset = "tokens";
  int seq_len = 64;
  bool force = false;

  std::ostream* err = &std::cerr;  // where error messages go

  // Adds "tokenize FILE... --output F [--seq-len N] [--dataset NAME] [--force]" to `parent`.
  void attach(CLI::App& parent);

  // After parsing: reads, checks and converts the inputs, writes the HDF5 file through a
  // temporary name. Returns 0, 2 (bad input: unreadable or non-UTF-8 file, existing output
  // without --force, no rows) or 3 (the write failed), after one message on *err.
  int run(std::ostream& out);
};

}  // namespace minipipe

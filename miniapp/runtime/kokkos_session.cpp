// Kokkos' start and end for the driver: the --kokkos-* option checks that Kokkos 3.4 lacks, then
// Kokkos::initialize, with every rejection turned into one usage message.
#include "miniapp/runtime/kokkos_session.hpp"

#include <Kokkos_Core.hpp>
#include <exception>

#include "miniapp/io/message_text.hpp"

namespace minipipe {
namespace {

bool is_count(const std::string& v, long long lo) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoll(v) >= lo;
}

// Kokkos 3.4 answers a malformed --kokkos-* value with an uncaught std::invalid_argument (from
// stoi) on every rank and ignores unknown options silently; both are checked here first. The
// list covers the options of Kokkos 3.x and 4.x. Returns "" or the error message.
std::string check_kokkos_args(const std::vector<char*>& args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string a = args[i];
    const auto eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string v = has_value ? a.substr(eq + 1) : std::string();
    auto bad = [&](const std::string& allowed) {
      return "command line: Kokkos option " + quoted_text(a) + " is malformed; allowed: " + name + "=" + allowed;
    };
    if (name == "--kokkos-threads" || name == "--kokkos-num-threads" || name == "--kokkos-numa") {
      if (!has_value || !is_count(v, 1)) return bad("INT (>= 1)");
    } else if (name == "--kokkos-device-id" || name == "--kokkos-skip-device") {
      if (!has_value || !is_count(v, 0)) return bad("INT (>= 0)");
    } else if (name == "--kokkos-num-devices" || name == "--kokkos-ndevices") {
      const auto comma = v.find(',');
      if (!has_value || !is_count(v.substr(0, comma), 1) ||
          (comma != std::string::npos && !is_count(v.substr(comma + 1), 0)))
        return bad("INT[,INT] (devices >= 1, optional device to skip)");
    } else if (name == "--kokkos-map-device-id-by") {
      if (v != "mpi_rank" && v != "random") return bad("mpi_rank | random");
    } else if (name == "--kokkos-tools-libs" || name == "--kokkos-tools-library" || name == "--kokkos-tools-args") {
      if (!has_value || v.empty()) return bad("TEXT");
    } else if (name == "--kokkos-help" || name == "--kokkos-disable-warnings" || name == "--kokkos-tune-internals" ||
               name == "--kokkos-print-configuration" || name == "--kokkos-tools-help") {
      if (has_value) return "command line: Kokkos option " + quoted_text(a) + " takes no value; allowed: " + name;
    } else {
      return "command line: unknown Kokkos option " + quoted_text(a) +
             "; allowed: --kokkos-threads=INT, --kokkos-num-threads=INT, --kokkos-numa=INT, "
             "--kokkos-device-id=INT, --kokkos-num-devices=INT[,INT], --kokkos-skip-device=INT, "
             "--kokkos-map-device-id-by=mpi_rank|random, --kokkos-tools-libs=PATH, --kokkos-tools-args=TEXT, "
             "--kokkos-disable-warnings, --kokkos-tune-internals, --kokkos-print-configuration, --kokkos-help";
    }
  }
  return {};
}

}  // namespace

std::string initialize_kokkos(std::vector<char*> args) {
  std::string error = check_kokkos_args(args);
  if (!error.empty()) return error;
  int argc = static_cast<int>(args.size());
  try {
    Kokkos::initialize(argc, args.data());
  } catch (const std::exception& e) {
    return std::string("command line: Kokkos rejected its options: ") + e.what();
  }
  return {};
}

void finalize_kokkos() {
  Kokkos::finalize();
}

}  // namespace minipipe

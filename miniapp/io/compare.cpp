// `minipipe compare`: walks two dumps, compares each dataset bit for bit in row blocks and
// measures how far apart differing values are (abs, rel, ULP); exit codes follow h5diff.
#include "miniapp/io/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "miniapp/io/dump_reader.hpp"

namespace minipipe::io {

const char* to_string(DiffStatus s) {
  switch (s) {
    case DiffStatus::identical:
      return "identical";
    case DiffStatus::within_tolerance:
      return "within tolerance";
    case DiffStatus::differ:
      return "DIFFERENT";
    case DiffStatus::only_in_a:
      return "ONLY IN A";
    case DiffStatus::only_in_b:
      return "ONLY IN B";
    case DiffStatus::shape_mismatch:
      return "SHAPE MISMATCH";
    case DiffStatus::type_mismatch:
      return "TYPE MISMATCH";
    case DiffStatus::not_comparable:
      return "NOT COMPARABLE";
  }
  return "?";
}

namespace {

constexpr std::uint64_t kBlockElements = std::uint64_t{1} << 22;  // per file, per read

// Signed-magnitude float bits mapped onto a line where adjacent floats are one apart:
// +x -> (magnitude), -x -> -(magnitude); +0 and -0 coincide. Distance = |ka - kb|, computed
// unsigned so opposite-sign doubles cannot overflow.
template <typename Bits>
std::uint64_t ordered_distance(Bits a, Bits b) {
  constexpr Bits sign = Bits{1} << (8 * sizeof(Bits) - 1);
  const std::uint64_t ma = a & ~sign, mb = b & ~sign;
  const bool na = (a & sign) != 0, nb = (b & sign) != 0;
  if (na == nb) return ma > mb ? ma - mb : mb - ma;
  return ma + mb;  // at most 2 * (2^63 - 1) < 2^64
}

std::string index_text(std::uint64_t flat, const std::vector<std::uint64_t>& dims) {
  std::vector<std::uint64_t> idx(dims.size());
  for (std::size_t i = dims.size(); i-- > 0;) {
    idx[i] = dims[i] ? flat % dims[i] : 0;
    flat = dims[i] ? flat / dims[i] : 0;
  }
  return dims_text(idx);
}

template <typename T>
std::string value_text(T v) {
  std::ostringstream os;
  if constexpr (std::is_floating_point_v<T>) {
    os << std::setprecision(std::numeric_limits<T>::max_digits10) << v;
  } else {
    os << +v;  // + promotes int8 to print as a number
  }
  return os.str();
}

// The first differing element's distance: "n/a (NaN)" when a NaN is involved (either side, or
// both with different payloads), and for +0 vs -0 the 0 ULP says why the bits still differ.
std::string ulp_text(const DatasetDiff& d) {
  if (d.first_nan) return "ULP n/a (NaN)";
  std::string t = std::to_string(d.first_ulp) + " ULP";
  if (d.first_ulp == 0 && (d.first_a == "-0" || d.first_b == "-0"))
    t += " (+0 vs -0: equal values, the sign bit differs)";
  return t;
}

struct Tolerance {
  bool active = false;
  double rtol = -1.0, atol = -1.0, norm_rtol = -1.0;  // negative: not set
  bool within(double abs, double rel) const { return (atol >= 0.0 && abs <= atol) || (rtol >= 0.0 && rel <= rtol); }
};

// Accumulates one dataset's element statistics across row blocks.
template <typename T>
void compare_block(const T* a, const T* b, std::uint64_t n, std::uint64_t base, const Tolerance& tol, DatasetDiff& d) {
  for (std::uint64_t i = 0; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      const double m = std::max(std::fabs(static_cast<double>(a[i])), std::fabs(static_cast<double>(b[i])));
      if (std::isfinite(m)) d.max_magnitude = std::max(d.max_magnitude, m);
    }
    if (std::memcmp(&a[i], &b[i], sizeof(T)) == 0) continue;
    if (d.differing++ == 0) {
      d.first_index = base + i;
      d.first_a = value_text(a[i]);
      d.first_b = value_text(b[i]);
    }
    double abs = 0.0, rel = 0.0;
    std::uint64_t ulp = 0;
    bool nan = false;
    if constexpr (std::is_floating_point_v<T>) {
      using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
      Bits ba, bb;
      std::memcpy(&ba, &a[i], sizeof(T));
      std::memcpy(&bb, &b[i], sizeof(T));
      ulp = ordered_distance(ba, bb);
      const double x = a[i], y = b[i];
      if (std::isnan(x) || std::isnan(y)) {
        // A NaN has no place on the ordered line: its "distance" would be the payload's bits
        // (docs/dump-format.md, "NaN and signed zeros"). It differs, with no ULP distance.
        nan = true;
        ulp = 0;
        ++d.nan_mismatches;  // includes two NaNs with different payloads
        abs = rel = std::numeric_limits<double>::infinity();
      } else {
        abs = std::fabs(x - y);
        const double m = std::max(std::fabs(x), std::fabs(y));
        rel = abs == 0.0 ? 0.0 : (std::isinf(m) ? std::numeric_limits<double>::infinity() : abs / m);
      }
    } else {
      // Integers: the ULP distance is the integer difference, exact in 64 bits.
      const bool a_big = a[i] > b[i];
      ulp = a_big ? static_cast<std::uint64_t>(a[i]) - static_cast<std::uint64_t>(b[i])
                  : static_cast<std::uint64_t>(b[i]) - static_cast<std::uint64_t>(a[i]);
      abs = static_cast<double>(ulp);
      const double m = std::max(std::fabs(static_cast<double>(a[i])), std::fabs(static_cast<double>(b[i])));
      rel = abs / m;  // m > 0: the values differ
    }
    if (d.differing == 1) d.first_ulp = ulp, d.first_nan = nan;
    d.max_abs = std::max(d.max_abs, abs);
    d.max_rel = std::max(d.max_rel, rel);
    d.max_ulp = std::max(d.max_ulp, ulp);
    if (!tol.active || nan || !tol.within(abs, rel)) ++d.out_of_tolerance;
  }
}

template <typename T>
void compare_typed(const DumpReader& ra, const DumpReader& rb, const DatasetInfo& ia, const DatasetInfo& ib,
                   const Tolerance& tol, DatasetDiff& d) {
  const std::uint64_t row_elems = std::max<std::uint64_t>(ia.row_elements(), 1);
  const std::uint64_t rows_per_block = std::max<std::uint64_t>(1, kBlockElements / row_elems);
  std::vector<T> a, b;
  for (std::uint64_t r0 = 0; r0 < ia.rows(); r0 += rows_per_block) {
    const std::uint64_t nr = std::min(rows_per_block, ia.rows() - r0);
    a.resize(nr * row_elems);
    b.resize(nr * row_elems);
    ra.read_rows(ia, r0, nr, a.data());
    rb.read_rows(ib, r0, nr, b.data());
    compare_block(a.data(), b.data(), nr * row_elems, r0 * row_elems, tol, d);
  }
}

// Bitwise only, for fixed-size non-numeric types (fixed strings, compounds, ...).
void compare_raw(const DumpReader& ra, const DumpReader& rb, const DatasetInfo& ia, const DatasetInfo& ib,
                 DatasetDiff& d) {
  const std::uint64_t row_elems = std::max<std::uint64_t>(ia.row_elements(), 1);
  const std::uint64_t rows_per_block = std::max<std::uint64_t>(1, kBlockElements / row_elems);
  const std::size_t es = ia.elem_size;
  std::vector<unsigned char> a, b;
  for (std::uint64_t r0 = 0; r0 < ia.rows(); r0 += rows_per_block) {
    const std::uint64_t nr = std::min(rows_per_block, ia.rows() - r0);
    a.resize(nr * row_elems * es);
    b.resize(a.size());
    ra.read_rows(ia, r0, nr, a.data());
    rb.read_rows(ib, r0, nr, b.data());
    for (std::uint64_t i = 0; i < nr * row_elems; ++i) {
      if (std::memcmp(&a[i * es], &b[i * es], es) == 0) continue;
      if (d.differing++ == 0) d.first_index = r0 * row_elems + i;
      ++d.out_of_tolerance;
    }
  }
}

DatasetDiff compare_dataset(const DumpReader& ra, const DumpReader& rb, const DatasetInfo& ia, const DatasetInfo& ib,
                            const Tolerance& tol) {
  DatasetDiff d;
  d.path = ia.path;
  d.type_a = ia.type_text;
  d.type_b = ib.type_text;
  d.dims_a = ia.dims;
  d.dims_b = ib.dims;
  if (ia.type_text != ib.type_text || ia.value_class != ib.value_class || ia.elem_size != ib.elem_size) {
    d.status = DiffStatus::type_mismatch;
    return d;
  }
  if (ia.dims != ib.dims) {
    d.status = DiffStatus::shape_mismatch;
    return d;
  }
  if (ia.variable_length) {
    d.status = DiffStatus::not_comparable;
    return d;
  }
  d.elements = ia.elements();
  const bool s = ia.value_class == ValueClass::signed_int;
  switch (ia.value_class) {
    case ValueClass::floating:
      if (ia.elem_size == 4)
        compare_typed<float>(ra, rb, ia, ib, tol, d);
      else
        compare_typed<double>(ra, rb, ia, ib, tol, d);
      break;
    case ValueClass::signed_int:
    case ValueClass::unsigned_int:
      switch (ia.elem_size) {
        case 1:
          s ? compare_typed<std::int8_t>(ra, rb, ia, ib, tol, d) : compare_typed<std::uint8_t>(ra, rb, ia, ib, tol, d);
          break;
        case 2:
          s ? compare_typed<std::int16_t>(ra, rb, ia, ib, tol, d)
            : compare_typed<std::uint16_t>(ra, rb, ia, ib, tol, d);
          break;
        case 4:
          s ? compare_typed<std::int32_t>(ra, rb, ia, ib, tol, d)
            : compare_typed<std::uint32_t>(ra, rb, ia, ib, tol, d);
          break;
        case 8:
          s ? compare_typed<std::int64_t>(ra, rb, ia, ib, tol, d)
            : compare_typed<std::uint64_t>(ra, rb, ia, ib, tol, d);
          break;
        default:
          compare_raw(ra, rb, ia, ib, d);
          break;
      }
      break;
    case ValueClass::other:
      compare_raw(ra, rb, ia, ib, d);
      break;
  }
  if (d.max_magnitude > 0) d.norm_rel = d.max_abs / d.max_magnitude;
  if (d.differing == 0)
    d.status = DiffStatus::identical;
  else if (d.out_of_tolerance == 0 ||
           (tol.norm_rtol >= 0.0 && d.nan_mismatches == 0 && d.max_abs <= tol.norm_rtol * d.max_magnitude))
    d.status = DiffStatus::within_tolerance;
  else
    d.status = DiffStatus::differ;
  return d;
}

void compare_attributes(const DumpReader& ra, const DumpReader& rb, CompareReport& rep) {
  // Objects of both files (root included); attributes of objects present in only one file are
  // reported as missing on the other side.
  std::set<std::string> objects{"/"};
  for (const auto& o : ra.list_objects()) objects.insert(o.path);
  for (const auto& o : rb.list_objects()) objects.insert(o.path);
  auto names_of = [](const DumpReader& r, const std::string& obj) {
    try {
      return r.attribute_names(obj);
    } catch (const ReadError&) {
      return std::vector<std::string>{};  // object absent in this file
    }
  };
  for (const auto& obj : objects) {
    const auto na = names_of(ra, obj), nb = names_of(rb, obj);
    std::set<std::string> names(na.begin(), na.end());
    names.insert(nb.begin(), nb.end());
    for (const auto& n : names) {
      AttributeDiff ad;
      ad.object = obj;
      ad.name = n;
      ad.in_a = std::binary_search(na.begin(), na.end(), n);
      ad.in_b = std::binary_search(nb.begin(), nb.end(), n);
      if (ad.in_a) ad.value_a = ra.attribute_text(obj, n);
      if (ad.in_b) ad.value_b = rb.attribute_text(obj, n);
      ad.same = ad.in_a && ad.in_b && ad.value_a == ad.value_b;
      if (!ad.same) ++rep.attributes_differing;
      rep.attributes.push_back(std::move(ad));
    }
  }
}

std::string short_text(const std::string& s) {
  std::string t = s.size() > 60 ? s.substr(0, 57) + "..." : s;
  for (auto& c : t)
    if (c == '\n' || c == '\x1f') c = ' ';
  return "\"" + t + "\"";
}

}  // namespace

std::string first_divergence_line(const CompareReport& rep) {
  std::ostringstream os;
  os << "first divergence: ";
  if (!rep.first.found) {
    os << "none";
    if (rep.first.one_file_only > 0)
      os << " among the datasets both files hold (" << rep.first.one_file_only << " in one file only)";
    return os.str();
  }
  const DatasetDiff& d = rep.datasets[rep.first.dataset];
  const DatasetOrigin& o = d.origin;
  os << o.short_path << " (kernel " << o.kernel << ", step " << o.step << ", layer " << o.layer << ") ";
  switch (d.status) {
    case DiffStatus::shape_mismatch:
      os << "shape " << dims_text(d.dims_a) << " vs " << dims_text(d.dims_b);
      break;
    case DiffStatus::type_mismatch:
      os << "type " << d.type_a << " vs " << d.type_b;
      break;
    case DiffStatus::not_comparable:
      os << "not comparable (" << d.type_a << ", variable-length)";
      break;
    default:
      os << "element " << d.first_index << " " << index_text(d.first_index, d.dims_a) << ": ";
      if (d.first_a.empty())
        os << "bytes differ";  // a non-numeric type: no values to print
      else
        os << d.first_a << " vs " << d.first_b << ", " << ulp_text(d);
      break;
  }
  os << "; " << rep.first.later << " later datasets differ";
  return os.str();
}

CompareReport compare_dumps(const std::string& a, const std::string& b, const CompareOptions& opt) {
  const DumpReader ra(a), rb(b);
  Tolerance tol;
  tol.active = opt.rtol.has_value() || opt.atol.has_value();
  if (opt.norm_rtol) tol.norm_rtol = *opt.norm_rtol;
  if (opt.rtol) tol.rtol = *opt.rtol;
  if (opt.atol) tol.atol = *opt.atol;

  const std::vector<std::string> skip =
      opt.include_meta ? std::vector<std::string>{} : std::vector<std::string>{"/meta"};
  std::map<std::string, DatasetInfo> da, db;
  for (auto& i : ra.list_datasets(skip)) da.emplace(i.path, i);
  for (auto& i : rb.list_datasets(skip)) db.emplace(i.path, i);
  // Datasets in the order the computation made them, so the per-dataset lines and the first
  // divergence read like the run.
  std::string optimizer = "AdamW::update";
  try {
    optimizer = optimizer_update_label(ra.string_attribute("/meta", "deck"));
  } catch (const ReadError&) {
    // no deck in /meta (a file not written by miniPipe): keep the default optimizer's label
  }
  std::set<std::string> names;
  for (const auto& [k, v] : da) names.insert(k);
  for (const auto& [k, v] : db) names.insert(k);
  std::vector<DatasetOrigin> order;
  for (const auto& n : names) order.push_back(dataset_origin(n, optimizer));
  std::sort(order.begin(), order.end());

  CompareReport rep;
  for (auto& origin : order) {
    const std::string& n = origin.path;
    const auto ia = da.find(n), ib = db.find(n);
    DatasetDiff d;
    if (ib == db.end()) {
      d.path = n;
      d.status = DiffStatus::only_in_a;
      d.type_a = ia->second.type_text;
      d.dims_a = ia->second.dims;
    } else if (ia == da.end()) {
      d.path = n;
      d.status = DiffStatus::only_in_b;
      d.type_b = ib->second.type_text;
      d.dims_b = ib->second.dims;
    } else {
      d = compare_dataset(ra, rb, ia->second, ib->second, tol);
    }
    switch (d.status) {
      case DiffStatus::identical:
        ++rep.identical;
        break;
      case DiffStatus::within_tolerance:
        ++rep.within_tolerance;
        break;
      case DiffStatus::differ:
        ++rep.differing;
        break;
      case DiffStatus::only_in_a:
      case DiffStatus::only_in_b:
        ++rep.differing;
        ++rep.missing;
        break;
      case DiffStatus::shape_mismatch:
      case DiffStatus::type_mismatch:
      case DiffStatus::not_comparable:
        ++rep.differing;
        ++rep.mismatched;
        break;
    }
    rep.max_abs = std::max(rep.max_abs, d.max_abs);
    rep.max_rel = std::max(rep.max_rel, d.max_rel);
    rep.max_norm_rel = std::max(rep.max_norm_rel, d.norm_rel);
    rep.max_ulp = std::max(rep.max_ulp, d.max_ulp);
    d.origin = std::move(origin);
    const bool one_file = d.status == DiffStatus::only_in_a || d.status == DiffStatus::only_in_b;
    const bool diverges = !one_file && d.status != DiffStatus::identical && d.status != DiffStatus::within_tolerance;
    if (one_file) ++rep.first.one_file_only;
    if (diverges && rep.first.found) ++rep.first.later;
    if (diverges && !rep.first.found) {
      rep.first.found = true;
      rep.first.dataset = rep.datasets.size();
    }
    rep.datasets.push_back(std::move(d));
  }
  if (opt.include_meta) compare_attributes(ra, rb, rep);
  rep.exit_code = (rep.differing > 0 || rep.attributes_differing > 0) ? 1 : 0;
  return rep;
}

void print_report(const CompareReport& rep, const CompareOptions& opt, std::ostream& out) {
  std::ostringstream os;
  auto num = [](double v) {
    std::ostringstream s;
    s << std::setprecision(6) << v;
    return s.str();
  };
  for (const auto& d : rep.datasets) {
    const bool same = d.status == DiffStatus::identical;
    if (same && !opt.verbose) continue;
    os << std::left << std::setw(17) << to_string(d.status) << " " << d.path;
    switch (d.status) {
      case DiffStatus::only_in_a:
        os << "  " << d.type_a << " " << dims_text(d.dims_a);
        break;
      case DiffStatus::only_in_b:
        os << "  " << d.type_b << " " << dims_text(d.dims_b);
        break;
      case DiffStatus::shape_mismatch:
        os << "  " << dims_text(d.dims_a) << " vs " << dims_text(d.dims_b);
        break;
      case DiffStatus::type_mismatch:
        os << "  " << d.type_a << " vs " << d.type_b;
        break;
      case DiffStatus::not_comparable:
        os << "  " << d.type_a << " (variable-length)";
        break;
      case DiffStatus::identical:
        os << "  " << d.type_a << " " << dims_text(d.dims_a);
        break;
      case DiffStatus::within_tolerance:
      case DiffStatus::differ:
        os << "  " << d.type_a << " " << dims_text(d.dims_a) << "  " << d.differing << " of " << d.elements
           << " elements differ";
        if (d.status == DiffStatus::differ && d.out_of_tolerance != d.differing)
          os << " (" << d.out_of_tolerance << " beyond tolerance)";
        os << "; max abs " << num(d.max_abs) << ", max rel " << num(d.max_rel) << ", normwise rel " << num(d.norm_rel)
           << ", max ulp " << d.max_ulp;
        if (d.nan_mismatches) os << ", NaN mismatches " << d.nan_mismatches;
        if (!d.first_a.empty())
          os << "; first at " << index_text(d.first_index, d.dims_a) << ": " << d.first_a << " vs " << d.first_b;
        break;
    }
    os << "\n";
  }
  for (const auto& at : rep.attributes) {
    if (at.same && !opt.verbose) continue;
    os << std::left << std::setw(17) << (at.same ? "identical" : "ATTRIBUTE DIFFERS") << " " << at.object << "@"
       << at.name << "  ";
    // Values print without their "kind:" prefix unless the kinds themselves differ.
    const auto kind = [](const std::string& t) { return t.substr(0, t.find(':')); };
    const bool same_kind = kind(at.value_a) == kind(at.value_b);
    const auto shown = [&](const std::string& t) { return short_text(same_kind ? t.substr(t.find(':') + 1) : t); };
    if (!at.in_a)
      os << "only in B";
    else if (!at.in_b)
      os << "only in A";
    else if (at.same)
      os << shown(at.value_a);
    else
      os << shown(at.value_a) << " vs " << shown(at.value_b);
    os << "\n";
  }
  os << "summary: " << rep.datasets.size() << " datasets compared, " << rep.identical << " identical, ";
  if (opt.rtol || opt.atol || opt.norm_rtol) os << rep.within_tolerance << " within tolerance, ";
  os << rep.differing << " differing";
  if (rep.missing || rep.mismatched)
    os << " (" << rep.missing << " in one file only, " << rep.mismatched << " shape/type mismatches)";
  if (opt.include_meta)
    os << ", " << rep.attributes.size() << " attributes compared, " << rep.attributes_differing << " differing";
  os << "; max abs " << num(rep.max_abs) << ", max rel " << num(rep.max_rel) << ", max normwise rel "
     << num(rep.max_norm_rel) << ", max ulp " << rep.max_ulp;
  if (opt.norm_rtol) os << " (normwise rtol " << num(*opt.norm_rtol) << ")";
  if (opt.rtol) os << " (rtol " << num(*opt.rtol) << ")";
  if (opt.atol) os << " (atol " << num(*opt.atol) << ")";
  os << "\n" << first_divergence_line(rep) << "\n";
  out << os.str();
}

int compare_files(const std::string& a, const std::string& b, const CompareOptions& opt, std::ostream& out,
                  std::string* error) {
  try {
    const CompareReport rep = compare_dumps(a, b, opt);
    print_report(rep, opt, out);
    return rep.exit_code;
  } catch (const std::exception& e) {
    *error = e.what();
    return 2;
  }
}

int compare_files(const std::string& a, const std::string& b, const CompareOptions& opt, std::ostream& out) {
  std::string error;
  const int rc = compare_files(a, b, opt, out, &error);
  if (!error.empty()) out << "error: " << error << "\n";
  return rc;
}

}  // namespace minipipe::io

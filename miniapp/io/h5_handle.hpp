// Internal to miniapp/io: RAII ownership of HDF5 identifiers and HDF5 error-stack capture, so
// the writer, reader and compare code turn HDF5 failures into exceptions with context.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

namespace minipipe::io::detail {

// Owns one HDF5 identifier; the close function matches its kind (H5Fclose, H5Dclose, ...).
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  ~H5Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports whether HDF5 accepted the close (a failed flush shows up here).
  bool reset() {
    bool ok = true;
    if (id_ >= 0 && closer_ != nullptr) ok = closer_(id_) >= 0;
    id_ = H5I_INVALID_HID;
    return ok;
  }
  // Gives up ownership without closing (used where closing would need peers that are gone).
  hid_t release() { return std::exchange(id_, H5I_INVALID_HID); }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// HDF5 prints its error stack to stderr by default; our callers get an exception instead, so
// printing is switched off while one of our calls runs and restored afterwards.
class H5QuietErrors {
 public:
  H5QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~H5QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  H5QuietErrors(const H5QuietErrors&) = delete;
  H5QuietErrors& operator=(const H5QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The innermost messages of the current HDF5 error stack (the specific cause, e.g. the errno
// text of a failed open), then clears the stack. Empty when HDF5 recorded nothing.
std::string h5_error_text();

}  // namespace minipipe::io::detail

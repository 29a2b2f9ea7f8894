//===- Npy.h - reading NumPy .npy files for ampc-train ----------*- C++ -*-===//
//
// A strict reader: any file it cannot read exactly (bad magic, truncated,
// Fortran order, big-endian or unknown dtype, trailing bytes) is refused
// with a one-line message, never a crash. Plain C++ (ampc-train links no
// LLVM).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TOOLS_AMPC_TRAIN_NPY_H
#define AMPC_TOOLS_AMPC_TRAIN_NPY_H

#include "ampc/Runtime/ampc.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampc::train {

/// A .npy array: C order, little-endian elements.
struct NpyArray {
  /// 'f' (float), 'i' (signed), 'u' (unsigned) or 'b' (bool).
  char kind = 0;
  /// Bytes per element: 1, 2, 4 or 8.
  int itemSize = 0;
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;

  size_t elements() const { return data.size() / size_t(itemSize); }
};

/// Reads the .npy file (format 1.0, 2.0 or 3.0) at `path`; on failure
/// returns false with `error` = "PATH: what is wrong".
bool readNpy(const std::string &path, NpyArray &array, std::string &error);

/// The same for a file's bytes already read; `path` names it in messages.
bool parseNpy(const std::string &bytes, const std::string &path,
              NpyArray &array, std::string &error);

/// "float64 (1797, 64)": the NumPy dtype name and the shape, for messages.
std::string describeNpy(const NpyArray &array);

/// Converts `array` to `dtype` when that is lossless or the obvious reading
/// (floats to any float type, integers to wider integers, integers to
/// narrower ones when every value fits, bool to bool). On failure returns
/// false with `why` saying what does not convert.
bool convertNpy(const NpyArray &array, ampc_dtype dtype,
                std::vector<unsigned char> &out, std::string &why);

/// Writes `count` elements of `dtype` at `data` as a .npy file (format 1.0)
/// of `shape`; bfloat16, which NumPy has no dtype for, as float32. On
/// failure returns false with `error` = "PATH: what is wrong".
bool writeNpy(const std::string &path, ampc_dtype dtype,
              const std::vector<int64_t> &shape, const unsigned char *data,
              std::string &error);

} // namespace ampc::train

#endif // AMPC_TOOLS_AMPC_TRAIN_NPY_H

//===- Npy.cpp - reading NumPy .npy files for ampc-train -------------------===//
//
// The format (numpy/lib/format.py): "\x93NUMPY", major and minor version
// bytes, the header length (u16 in 1.0, u32 in 2.0 and 3.0), then a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a newline, then the elements.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"


#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Support/OutputFile.h"
#include "ampc/Support/RegularFile.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

namespace ampc::train {
namespace {

/// A cursor over the header's dict literal.
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text(text) {}

  void skipSpaces() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(char c) {
    skipSpaces();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skipSpaces();
    return pos < text.size() && text[pos] == c;
  }
  bool string(std::string &out) {
    skipSpaces();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return false;
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string::npos)
      return false;
    out = text.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool boolean(bool &out) {
    skipSpaces();
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}})
      if (text.compare(pos, std::strlen(word), word) == 0) {
        pos += std::strlen(word);
        out = value;
        return true;
      }
    return false;
  }
  /// A tuple of non-negative integers: (), (3,), (3, 4).
  bool shape(std::vector<int64_t> &out) {
    if (!consume('('))
      return false;
    out.clear();
    while (!consume(')')) {
      skipSpaces();
      if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
        return false;
      int64_t value = 0;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        if (value > (std::numeric_limits<int64_t>::max() - 9) / 10)
          return false;
        value = value * 10 + (text[pos++] - '0');
      }
      // Python may write 3L for a long in old files.
      if (pos < text.size() && text[pos] == 'L')
        ++pos;
      out.push_back(value);
      if (!consume(',') && !peek(')'))
        return false;
    }
    return true;
  }

private:
  const std::string &text;
  size_t pos = 0;
};

const char *numpyName(char kind, int itemSize) {
  switch (kind) {
  case 'f':
    return itemSize == 2 ? "float16" : itemSize == 4 ? "float32" : "float64";
  case 'i':
    return itemSize == 1   ? "int8"
           : itemSize == 2 ? "int16"
           : itemSize == 4 ? "int32"
                           : "int64";
  case 'u':
    return itemSize == 1   ? "uint8"
           : itemSize == 2 ? "uint16"
           : itemSize == 4 ? "uint32"
                           : "uint64";
  default:
    return "bool";
  }
}

/// Element i of a float array.
double floatAt(const NpyArray &a, size_t i) {
  const unsigned char *p = a.data.data() + i * size_t(a.itemSize);
  switch (a.itemSize) {
  case 2: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return numeric::f16BitsToF32(h);
  }
  case 4: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  default: {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  }
}

/// Element i of an integer or bool array, exactly (a uint64 past int64's
/// range included).
__int128 integerAt(const NpyArray &a, size_t i) {
  const unsigned char *p = a.data.data() + i * size_t(a.itemSize);
  uint64_t bits = 0;
  std::memcpy(&bits, p, size_t(a.itemSize)); // little-endian host
  if (a.kind == 'u' || a.kind == 'b')
    return bits;
  int shift = 64 - 8 * a.itemSize;
  return int64_t(bits << shift) >> shift; // sign-extend
}

std::string integerText(__int128 v) {
  return v < 0 ? std::to_string(int64_t(v)) : std::to_string(uint64_t(v));
}

/// The values an integer dtype holds, as [lo, hi].
template <typename T> std::pair<__int128, __int128> rangeOf() {
  return {std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
}

template <typename T> void store(std::vector<unsigned char> &out, size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

} // namespace

bool readNpy(const std::string &path, NpyArray &array, std::string &error) {
  auto fail = [&](const std::string &what) {
    error = path + ": " + what;
    return false;
  };
  // Only a regular file (a FIFO would block), its size known before reading.
  ampc::RegularFile file;
  std::string bytes, reason;
  if (!file.open(path, reason))
    return fail("cannot open: " + reason);
  try {
    if (!file.readAll(bytes, std::numeric_limits<uint64_t>::max(), reason))
      return fail("cannot read: " + reason);
  } catch (const std::bad_alloc &) {
    return fail("cannot read: no memory for its " + std::to_string(file.size) +
                " bytes");
  }

  return parseNpy(bytes, path, array, error);
}

bool parseNpy(const std::string &bytes, const std::string &path,
              NpyArray &array, std::string &error) {
  auto fail = [&](const std::string &what) {
    error = path + ": " + what;
    return false;
  };
  if (bytes.size() < 6 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return fail("not a .npy file (no \\x93NUMPY magic)");
  if (bytes.size() < 10)
    return fail("truncated .npy header");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = static_cast<unsigned char>(bytes[8]) |
                   size_t(static_cast<unsigned char>(bytes[9])) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fail("truncated .npy header");
    headerLength = 0;
    for (int i = 3; i >= 0; --i)
      headerLength =
          headerLength << 8 | static_cast<unsigned char>(bytes[8 + i]);
    headerStart = 12;
  } else {
    return fail(".npy format version " + std::to_string(major) +
                " (ampc-train reads 1, 2 and 3)");
  }
  if (headerLength > bytes.size() - headerStart)
    return fail("truncated .npy header");
  std::string header = bytes.substr(headerStart, headerLength);

  HeaderParser parser(header);
  std::string descr;
  bool fortranOrder = false, haveDescr = false, haveOrder = false,
       haveShape = false;
  std::vector<int64_t> shape;
  if (!parser.consume('{'))
    return fail("malformed .npy header (not a dict)");
  while (!parser.consume('}')) {
    std::string key;
    if (!parser.string(key) || !parser.consume(':'))
      return fail("malformed .npy header");
    bool ok;
    if (key == "descr")
      ok = haveDescr = parser.string(descr);
    else if (key == "fortran_order")
      ok = haveOrder = parser.boolean(fortranOrder);
    else if (key == "shape")
      ok = haveShape = parser.shape(shape);
    else
      return fail("malformed .npy header (unknown key '" + key + "')");
    if (!ok)
      return fail("malformed .npy header (value of '" + key + "')");
    if (!parser.consume(',') && !parser.peek('}'))
      return fail("malformed .npy header");
  }
  if (!haveDescr || !haveOrder || !haveShape)
    return fail("malformed .npy header (needs descr, fortran_order and "
                "shape)");

  char byteOrder = descr.empty() ? 0 : descr[0];
  char kind = descr.size() > 1 ? descr[1] : 0;
  int itemSize = descr.size() == 3 ? descr[2] - '0' : 0;
  bool knownSize = kind == 'f'   ? itemSize == 2 || itemSize == 4 ||
                                       itemSize == 8
                   : kind == 'b' ? itemSize == 1
                   : (kind == 'i' || kind == 'u')
                       ? itemSize == 1 || itemSize == 2 || itemSize == 4 ||
                             itemSize == 8
                       : false;
  if (!knownSize || (byteOrder != '<' && byteOrder != '|' && byteOrder != '='))
    return fail(byteOrder == '>' ? "big-endian dtype '" + descr +
                                       "' (save it little-endian)"
                                 : "unsupported dtype '" + descr +
                                       "' (ampc-train reads bool, int, uint "
                                       "and float arrays)");
  if (fortranOrder && shape.size() > 1)
    return fail("Fortran-order array (save it with "
                "numpy.ascontiguousarray)");

  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d && count > std::numeric_limits<uint64_t>::max() / uint64_t(d) /
                         uint64_t(itemSize))
      return fail("shape too large");
    count *= uint64_t(d);
  }
  uint64_t dataBytes = count * uint64_t(itemSize);
  size_t dataStart = headerStart + headerLength;
  size_t available = bytes.size() - dataStart;
  if (available < dataBytes)
    return fail("truncated: the shape needs " + std::to_string(dataBytes) +
                " bytes of data, the file has " + std::to_string(available));
  if (available > dataBytes)
    return fail(std::to_string(available - dataBytes) +
                " bytes after the array's data");

  array.kind = kind;
  array.itemSize = itemSize;
  array.shape = std::move(shape);
  array.data.assign(bytes.begin() + std::ptrdiff_t(dataStart), bytes.end());
  return true;
}

std::string describeNpy(const NpyArray &array) {
  std::string s = std::string(numpyName(array.kind, array.itemSize)) + " (";
  for (size_t i = 0; i < array.shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(array.shape[i]);
  if (array.shape.size() == 1)
    s += ",";
  return s + ")";
}

bool convertNpy(const NpyArray &array, ampc_dtype dtype,
                std::vector<unsigned char> &out, std::string &why) {
  size_t count = array.elements();
  size_t size = ampc_dtype_size(dtype);
  out.assign(count * size, 0);
  bool isFloat = array.kind == 'f';
  bool isInteger = array.kind == 'i' || array.kind == 'u';
  switch (dtype) {
  case AMPC_DTYPE_F32:
  case AMPC_DTYPE_F64:
  case AMPC_DTYPE_F16:
  case AMPC_DTYPE_BF16:
    if (!isFloat) {
      why = "integer and bool arrays are not converted to floats";
      return false;
    }
    for (size_t i = 0; i < count; ++i) {
      double v = floatAt(array, i);
      // The value as the tensor stores it: a finite value that becomes inf
      // there (1e300 in float32, 70000 in float16) is refused, not trained
      // on as inf.
      double stored = v;
      if (dtype == AMPC_DTYPE_F64) {
        store(out, i, v);
      } else if (dtype == AMPC_DTYPE_F32) {
        store(out, i, float(v));
        stored = float(v);
      } else if (dtype == AMPC_DTYPE_F16) {
        uint16_t bits = numeric::f32ToF16Bits(float(v));
        store(out, i, bits);
        stored = numeric::f16BitsToF32(bits);
      } else {
        uint16_t bits = numeric::f32ToBf16Bits(float(v));
        store(out, i, bits);
        stored = numeric::bf16BitsToF32(bits);
      }
      if (std::isfinite(v) && !std::isfinite(stored)) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", v);
        why = "element " + std::to_string(i) + " (" + text +
              ") does not fit " + ampc_dtype_name(dtype) + " (it would be " +
              (stored > 0 ? "inf" : "-inf") + ")";
        return false;
      }
    }
    return true;
  case AMPC_DTYPE_I64:
  case AMPC_DTYPE_U64:
  case AMPC_DTYPE_I32:
  case AMPC_DTYPE_U32:
  case AMPC_DTYPE_I16:
  case AMPC_DTYPE_U16:
  case AMPC_DTYPE_I8:
  case AMPC_DTYPE_U8: {
    if (!isInteger) {
      why = isFloat ? "float arrays are not converted to integers"
                    : "bool arrays are not converted to integers";
      return false;
    }
    auto [lo, hi] = dtype == AMPC_DTYPE_I64   ? rangeOf<int64_t>()
                    : dtype == AMPC_DTYPE_U64 ? rangeOf<uint64_t>()
                    : dtype == AMPC_DTYPE_I32 ? rangeOf<int32_t>()
                    : dtype == AMPC_DTYPE_U32 ? rangeOf<uint32_t>()
                    : dtype == AMPC_DTYPE_I16 ? rangeOf<int16_t>()
                    : dtype == AMPC_DTYPE_U16 ? rangeOf<uint16_t>()
                    : dtype == AMPC_DTYPE_I8  ? rangeOf<int8_t>()
                                              : rangeOf<uint8_t>();
    for (size_t i = 0; i < count; ++i) {
      __int128 v = integerAt(array, i);
      if (v < lo || v > hi) {
        why = "element " + std::to_string(i) + " (" + integerText(v) +
              ") does not fit " + ampc_dtype_name(dtype);
        return false;
      }
      // Two's complement: the low `size` bytes are the value in any of the
      // integer dtypes it fits.
      uint64_t bits = static_cast<uint64_t>(v);
      std::memcpy(out.data() + i * size, &bits, size); // little-endian host
    }
    return true;
  }
  case AMPC_DTYPE_BOOL:
    if (array.kind != 'b') {
      why = "only bool arrays are converted to bool";
      return false;
    }
    out = array.data;
    return true;
  default:
    why = std::string("ampc-train does not feed ") + ampc_dtype_name(dtype) +
          " inputs";
    return false;
  }
}

} // namespace ampc::train

bool ampc::train::writeNpy(const std::string &path, ampc_dtype dtype,
                           const std::vector<int64_t> &shape,
                           const unsigned char *data, std::string &error) {
  const char *descr = nullptr;
  switch (dtype) {
  case AMPC_DTYPE_F32: case AMPC_DTYPE_BF16: descr = "<f4"; break;
  case AMPC_DTYPE_F64: descr = "<f8"; break;
  case AMPC_DTYPE_F16: descr = "<f2"; break;
  case AMPC_DTYPE_I64: descr = "<i8"; break;
  case AMPC_DTYPE_I32: descr = "<i4"; break;
  case AMPC_DTYPE_U64: descr = "<u8"; break;
  case AMPC_DTYPE_U32: descr = "<u4"; break;
  case AMPC_DTYPE_I16: descr = "<i2"; break;
  case AMPC_DTYPE_U16: descr = "<u2"; break;
  case AMPC_DTYPE_I8: descr = "|i1"; break;
  case AMPC_DTYPE_U8: descr = "|u1"; break;
  case AMPC_DTYPE_BOOL: descr = "|b1"; break;
  default:
    error = path + ": cannot write dtype " + ampc_dtype_name(dtype);
    return false;
  }
  size_t count = 1;
  std::string dims;
  for (int64_t d : shape) {
    count *= size_t(d);
    dims += std::to_string(d) + ", ";
  }
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version, header length, header padded with spaces and ended by
  // a newline so that the data starts at a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += char(1);
  bytes += char(0);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  if (dtype == AMPC_DTYPE_BF16) {
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits = uint32_t(data[2 * i] | (data[2 * i + 1] << 8)) << 16;
      bytes.append(reinterpret_cast<const char *>(&bits), 4);
    }
  } else {
    bytes.append(reinterpret_cast<const char *>(data),
                 count * ampc_dtype_size(dtype));
  }
  // The output rules of every ampc output (ampc/Support/OutputFile.h).
  std::string why;
  if (!ampc::writeOutputFile(path, {{bytes.data(), bytes.size()}}, {}, why)) {
    error = path + ": cannot write: " + why;
    return false;
  }
  return true;
}

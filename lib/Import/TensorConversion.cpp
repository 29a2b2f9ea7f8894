//===- TensorConversion.cpp - ONNX TensorProto to MLIR attributes ---------===//

#include "TensorConversion.h"
#include "ampc/Dialect/TensorSize.h"
#include "ampc/Support/RegularFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace mlir;
using onnx::TensorProto;

Type ampc::detail::elementTypeFromOnnx(MLIRContext *ctx, int dataType) {
  auto u = [&](unsigned w) {
    return IntegerType::get(ctx, w, IntegerType::Unsigned);
  };
  switch (dataType) {
  case TensorProto::FLOAT:
    return Float32Type::get(ctx);
  case TensorProto::FLOAT16:
    return Float16Type::get(ctx);
  case TensorProto::BFLOAT16:
    return BFloat16Type::get(ctx);
  case TensorProto::DOUBLE:
    return Float64Type::get(ctx);
  case TensorProto::BOOL:
    return IntegerType::get(ctx, 1);
  case TensorProto::INT8:
    return IntegerType::get(ctx, 8);
  case TensorProto::INT16:
    return IntegerType::get(ctx, 16);
  case TensorProto::INT32:
    return IntegerType::get(ctx, 32);
  case TensorProto::INT64:
    return IntegerType::get(ctx, 64);
  case TensorProto::UINT8:
    return u(8);
  case TensorProto::UINT16:
    return u(16);
  case TensorProto::UINT32:
    return u(32);
  case TensorProto::UINT64:
    return u(64);
  default:
    return {};
  }
}

std::string ampc::detail::onnxTypeName(int dataType) {
  if (TensorProto::DataType_IsValid(dataType))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(dataType));
  return "data type " + std::to_string(dataType);
}

namespace {
/// Reads the `expected` bytes of a tensor stored outside the model: the
/// location must stay inside the model's folder and name a regular file that
/// holds them at the offset, a declared length must be the tensor's size,
/// and only those bytes are read (in bounded chunks).
bool readExternal(const TensorProto &tensor, llvm::StringRef baseDir,
                  uint64_t expected, std::string &bytes, std::string &error) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &entry : tensor.external_data()) {
    auto parseNumber = [&](uint64_t &out) {
      if (llvm::StringRef(entry.value()).getAsInteger(10, out)) {
        error = "external data '" + entry.key() + "' is not a number: '" +
                entry.value() + "'";
        return false;
      }
      return true;
    };
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      if (!parseNumber(offset))
        return false;
    } else if (entry.key() == "length") {
      uint64_t l;
      if (!parseNumber(l))
        return false;
      length = l;
    }
  }
  if (location.empty()) {
    error = "external data has no 'location'";
    return false;
  }
  if (length && *length != expected) {
    error = "external data length " + std::to_string(*length) +
            " is not the tensor's size of " + std::to_string(expected) +
            " bytes";
    return false;
  }
  if (llvm::sys::path::is_absolute(location)) {
    error = "external data location '" + location +
            "' is absolute; it must be relative to the model's folder";
    return false;
  }
  llvm::SmallString<256> dirReal, fileReal, joined(baseDir.empty() ? "." : baseDir);
  llvm::sys::path::append(joined, location);
  if (llvm::sys::fs::real_path(baseDir.empty() ? "." : baseDir, dirReal) ||
      llvm::sys::fs::real_path(joined, fileReal)) {
    error = "external data file '" + location + "' not found next to the model";
    return false;
  }
  llvm::StringRef dir = dirReal, file = fileReal;
  if (!file.starts_with(dir) || file.size() <= dir.size() ||
      !llvm::sys::path::is_separator(file[dir.size()])) {
    error = "external data location '" + location +
            "' points outside the model's folder";
    return false;
  }
  ampc::RegularFile data;
  std::string reason;
  if (!data.open(fileReal.str().str(), reason)) {
    error = "cannot read external data file '" + location + "': " + reason;
    return false;
  }
  if (offset > data.size || expected > data.size - offset) {
    error = "external data file '" + location + "' holds " +
            std::to_string(data.size) + " bytes, too few for offset " +
            std::to_string(offset) + " and length " + std::to_string(expected);
    return false;
  }
  bytes.resize(static_cast<size_t>(expected));
  if (!data.readAt(offset, bytes.data(), bytes.size(), reason)) {
    error = "cannot read external data file '" + location + "': " + reason;
    return false;
  }
  return true;
}

/// Packs typed repeated fields into little-endian bytes of `width` bytes each.
template <typename Range>
std::string packIntegers(const Range &values, unsigned width) {
  std::string bytes;
  bytes.reserve(values.size() * width);
  for (auto v : values) {
    uint64_t bits = static_cast<uint64_t>(v);
    bytes.append(reinterpret_cast<const char *>(&bits), width);
  }
  return bytes;
}
} // namespace

DenseElementsAttr ampc::detail::convertTensor(MLIRContext *ctx,
                                              const TensorProto &tensor,
                                              llvm::StringRef baseDir,
                                              int64_t maxBytes,
                                              std::string &error) {
  Type element = elementTypeFromOnnx(ctx, tensor.data_type());
  if (!element) {
    error = "tensor '" + tensor.name() + "' has unsupported element type " +
            onnxTypeName(tensor.data_type());
    return {};
  }
  if (tensor.has_segment()) {
    error = "tensor '" + tensor.name() + "' is segmented, which is not supported";
    return {};
  }
  llvm::SmallVector<int64_t> dims;
  int64_t count = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0 || (d > 0 && count > (int64_t(1) << 40) / d)) {
      error = "tensor '" + tensor.name() + "' has invalid dimension " +
              std::to_string(d);
      return {};
    }
    dims.push_back(d);
    count *= d;
  }
  auto type = RankedTensorType::get(dims, element);
  unsigned width = element.isInteger(1)
                       ? 1
                       : (element.getIntOrFloatBitWidth() + 7) / 8;
  // Before anything is read or allocated: the tensor's size within the
  // limit (an external file may be sparse, a raw field is already here).
  if (std::string problem = ampc::checkTensorSize(type, maxBytes);
      !problem.empty()) {
    error = "tensor '" + tensor.name() + "' " + problem + " (--max-tensor-bytes)";
    return {};
  }

  std::string bytes;
  bool raw = false;
  if (tensor.data_location() == TensorProto::EXTERNAL) {
    if (!readExternal(tensor, baseDir, uint64_t(count) * width, bytes, error)) {
      error = "tensor '" + tensor.name() + "': " + error;
      return {};
    }
    raw = true;
  } else if (tensor.has_raw_data()) {
    bytes = tensor.raw_data();
    raw = true;
  }

  if (!raw) {
    switch (tensor.data_type()) {
    case TensorProto::FLOAT:
      bytes.assign(reinterpret_cast<const char *>(tensor.float_data().data()),
                   tensor.float_data_size() * 4);
      break;
    case TensorProto::DOUBLE:
      bytes.assign(reinterpret_cast<const char *>(tensor.double_data().data()),
                   tensor.double_data_size() * 8);
      break;
    case TensorProto::INT64:
      bytes = packIntegers(tensor.int64_data(), 8);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      bytes = packIntegers(tensor.uint64_data(), width);
      break;
    default: // int32_data carries every narrower type, f16/bf16 as bits
      bytes = packIntegers(tensor.int32_data(), width);
      break;
    }
  }
  if (static_cast<int64_t>(bytes.size()) != count * width) {
    error = "tensor '" + tensor.name() + "' holds " +
            std::to_string(bytes.size() / width) + " values, its shape needs " +
            std::to_string(count);
    return {};
  }
  if (count == 0)
    return DenseElementsAttr::get(type, llvm::ArrayRef<Attribute>());
  if (element.isInteger(1)) {
    llvm::SmallVector<bool> bits;
    for (char c : bytes)
      bits.push_back(c != 0);
    return DenseElementsAttr::get(type, bits);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, llvm::ArrayRef<char>(bytes.data(), bytes.size()));
}

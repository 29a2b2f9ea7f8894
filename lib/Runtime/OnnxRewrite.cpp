//===- OnnxRewrite.cpp - replace initializers in a serialized ONNX model ---===//
//
// A protobuf wire-format walker, just enough for one edit: the runtime may
// not link protobuf (docs/design.md), and an edit at the byte level keeps
// everything it does not touch exactly as the producer wrote it (unknown
// fields, field order, external-data initializers).
//
// Wire format: a message is a sequence of fields, each a varint key
// (field number << 3 | wire type) and a value: 0 varint, 1 fixed64,
// 2 varint length + bytes, 3/4 group start/end (deprecated, skipped),
// 5 fixed32. The paths edited are ModelProto.graph (7) ->
// GraphProto.initializer (5) -> TensorProto, whose name is field 8, and
// GraphProto.node (1) -> NodeProto (input 1, output 2, op_type 4, domain 7,
// attribute 5 -> AttributeProto: name 1, i 3, type 20).
//
//===----------------------------------------------------------------------===//

#include "OnnxRewrite.h"

#include "ampc/Runtime/ampc.h"

#include <map>

namespace ampc::runtime {
namespace {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorDims = 1;
constexpr uint32_t kTensorDataType = 2;
constexpr uint32_t kTensorName = 8;
constexpr uint32_t kTensorRawData = 9;
constexpr uint32_t kGraphNode = 1;
constexpr uint32_t kGraphOutput = 12;
constexpr uint32_t kValueInfoName = 1;
constexpr uint32_t kNodeInput = 1;
constexpr uint32_t kNodeOutput = 2;
constexpr uint32_t kNodeOpType = 4;
constexpr uint32_t kNodeAttribute = 5;
constexpr uint32_t kNodeDomain = 7;
constexpr uint32_t kAttributeName = 1;
constexpr uint32_t kAttributeInt = 3;
constexpr uint32_t kAttributeType = 20;
constexpr uint64_t kAttributeTypeInt = 2;
/// Groups nested deeper than this are refused rather than recursed into.
constexpr int kMaxGroupDepth = 64;

/// One field of a message: the bytes [begin, end) hold key and value; a
/// length-delimited value is [payloadBegin, end).
struct Field {
  uint32_t number = 0;
  uint32_t wireType = 0;
  size_t begin = 0, payloadBegin = 0, end = 0;
};

/// Walks the fields of the message in bytes [begin, end) of `data`.
class FieldReader {
public:
  FieldReader(const unsigned char *data, size_t begin, size_t end,
              std::string &error)
      : data(data), pos(begin), end(end), error(error) {}

  bool atEnd() const { return pos == end; }

  /// Reads the next field; false (with `error`) when it is malformed.
  bool next(Field &field) {
    field.begin = pos;
    uint64_t key;
    if (!readVarint(key))
      return false;
    field.number = static_cast<uint32_t>(key >> 3);
    field.wireType = static_cast<uint32_t>(key & 7);
    if (field.number == 0 || (key >> 3) > 0x1fffffff)
      return fail("invalid field number");
    if (field.wireType == kEndGroup)
      return fail("unexpected end of group");
    if (!skipValue(field.number, field.wireType, 0))
      return false;
    field.end = pos;
    field.payloadBegin =
        field.wireType == kLengthDelimited ? lastPayload : field.end;
    return true;
  }

private:
  bool fail(const std::string &what) {
    error = "malformed ONNX model: " + what + " at byte " + std::to_string(pos);
    return false;
  }

  bool readVarint(uint64_t &value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos == end)
        return fail("truncated varint");
      unsigned char byte = data[pos++];
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
    return fail("varint longer than 10 bytes");
  }

  bool skip(uint64_t n) {
    if (n > end - pos)
      return fail("field runs past the end of its message");
    pos += static_cast<size_t>(n);
    return true;
  }

  /// Skips the value of a field whose key was just read; remembers where a
  /// length-delimited payload starts in `lastPayload`.
  bool skipValue(uint32_t number, uint32_t wireType, int depth) {
    switch (wireType) {
    case kVarint: {
      uint64_t ignored;
      return readVarint(ignored);
    }
    case kFixed64:
      return skip(8);
    case kFixed32:
      return skip(4);
    case kLengthDelimited: {
      uint64_t length;
      if (!readVarint(length))
        return false;
      lastPayload = pos;
      return skip(length);
    }
    case kStartGroup: {
      if (depth >= kMaxGroupDepth)
        return fail("groups nested too deeply");
      for (;;) {
        uint64_t key;
        if (!readVarint(key))
          return false;
        uint32_t innerNumber = static_cast<uint32_t>(key >> 3);
        uint32_t innerType = static_cast<uint32_t>(key & 7);
        if (innerType == kEndGroup) {
          if (innerNumber != number)
            return fail("mismatched end of group");
          return true;
        }
        if (innerNumber == 0)
          return fail("invalid field number");
        if (!skipValue(innerNumber, innerType, depth + 1))
          return false;
      }
    }
    default:
      return fail("invalid wire type " + std::to_string(wireType));
    }
  }

  const unsigned char *data;
  size_t pos, end;
  std::string &error;
  size_t lastPayload = 0;
};

void putVarint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void putKey(std::string &out, uint32_t number, uint32_t wireType) {
  putVarint(out, uint64_t(number) << 3 | wireType);
}

void putLengthDelimited(std::string &out, uint32_t number,
                        const std::string &payload) {
  putKey(out, number, kLengthDelimited);
  putVarint(out, payload.size());
  out += payload;
}

/// A TensorProto with dims, data_type, name and raw_data, fields in number
/// order with unpacked dims, as protobuf itself writes onnx.proto (proto2).
std::string encodeTensor(const NamedTensor &t) {
  std::string out;
  for (int64_t d : t.shape) {
    putKey(out, kTensorDims, kVarint);
    putVarint(out, static_cast<uint64_t>(d));
  }
  putKey(out, kTensorDataType, kVarint);
  putVarint(out, static_cast<uint64_t>(static_cast<int64_t>(t.dtype)));
  putLengthDelimited(out, kTensorName, t.name);
  putKey(out, kTensorRawData, kLengthDelimited);
  putVarint(out, t.bytes);
  if (t.bytes)
    out.append(static_cast<const char *>(t.data), t.bytes);
  return out;
}

/// The name of the TensorProto in [begin, end) (the last name field, as
/// protobuf merges it); "" when it has none.
bool tensorName(const unsigned char *data, size_t begin, size_t end,
                std::string &name, std::string &error) {
  name.clear();
  FieldReader reader(data, begin, end, error);
  Field field;
  while (!reader.atEnd()) {
    if (!reader.next(field))
      return false;
    if (field.number == kTensorName) {
      if (field.wireType != kLengthDelimited) {
        error = "malformed ONNX model: an initializer's name is not a string";
        return false;
      }
      name.assign(reinterpret_cast<const char *>(data + field.payloadBegin),
                  field.end - field.payloadBegin);
    }
  }
  return true;
}

/// Copies the GraphProto in [begin, end) to `out`, replacing initializers.
bool rewriteGraph(const unsigned char *data, size_t begin, size_t end,
                  const std::map<std::string, const NamedTensor *> &byName,
                  std::map<std::string, bool> &replaced, std::string &out,
                  std::string &error) {
  FieldReader reader(data, begin, end, error);
  Field field;
  while (!reader.atEnd()) {
    if (!reader.next(field))
      return false;
    if (field.number == kGraphInitializer) {
      if (field.wireType != kLengthDelimited) {
        error = "malformed ONNX model: an initializer is not a message";
        return false;
      }
      std::string name;
      if (!tensorName(data, field.payloadBegin, field.end, name, error))
        return false;
      auto it = byName.find(name);
      if (it != byName.end()) {
        putLengthDelimited(out, kGraphInitializer, encodeTensor(*it->second));
        replaced[name] = true;
        continue;
      }
    }
    out.append(reinterpret_cast<const char *>(data + field.begin),
               field.end - field.begin);
  }
  return true;
}

/// Checks that a replacement's data size matches its dtype and shape.
bool checkReplacement(const NamedTensor &t, std::string &error) {
  size_t elementSize = ampc_dtype_size(static_cast<ampc_dtype>(t.dtype));
  if (!elementSize) {
    error = "replacement '" + t.name + "' has unknown dtype " +
            std::to_string(t.dtype);
    return false;
  }
  uint64_t count = 1;
  for (int64_t d : t.shape) {
    if (d < 0) {
      error = "replacement '" + t.name + "' has a negative dimension";
      return false;
    }
    if (d && count > UINT64_MAX / static_cast<uint64_t>(d)) {
      error = "replacement '" + t.name + "' is too large";
      return false;
    }
    count *= static_cast<uint64_t>(d);
  }
  if (count > UINT64_MAX / elementSize || count * elementSize != t.bytes ||
      (t.bytes && !t.data)) {
    error = "replacement '" + t.name + "' has " + std::to_string(t.bytes) +
            " bytes of data, its dtype and shape need " +
            std::to_string(count * elementSize);
    return false;
  }
  return true;
}

/// Copies the ModelProto `model` to `out` with its graph (field 7) replaced
/// by what `rewriteGraph(begin, end, graphOut)` writes for the graph's
/// payload [begin, end); every other byte is kept.
template <typename RewriteGraph>
bool rewriteModelGraph(const unsigned char *model, size_t size,
                       std::string &out, std::string &error,
                       RewriteGraph rewriteGraph) {
  if (!model && size) {
    error = "no model data";
    return false;
  }
  std::string result;
  result.reserve(size);
  FieldReader reader(model, 0, size, error);
  Field field;
  while (!reader.atEnd()) {
    if (!reader.next(field))
      return false;
    if (field.number != kModelGraph) {
      result.append(reinterpret_cast<const char *>(model + field.begin),
                    field.end - field.begin);
      continue;
    }
    if (field.wireType != kLengthDelimited) {
      error = "malformed ONNX model: the graph is not a message";
      return false;
    }
    std::string graph;
    if (!rewriteGraph(field.payloadBegin, field.end, graph))
      return false;
    putLengthDelimited(result, kModelGraph, graph);
  }
  out = std::move(result);
  return true;
}

} // namespace

bool rewriteOnnxInitializers(const unsigned char *model, size_t size,
                             const std::vector<NamedTensor> &replacements,
                             std::string &out, std::string &error) {
  std::map<std::string, const NamedTensor *> byName;
  std::map<std::string, bool> replaced;
  for (const NamedTensor &t : replacements) {
    if (!checkReplacement(t, error))
      return false;
    if (!byName.emplace(t.name, &t).second) {
      error = "two replacements for initializer '" + t.name + "'";
      return false;
    }
    replaced[t.name] = false;
  }
  std::string result;
  if (!rewriteModelGraph(model, size, result, error,
                         [&](size_t begin, size_t end, std::string &graph) {
                           return rewriteGraph(model, begin, end, byName,
                                               replaced, graph, error);
                         }))
    return false;
  for (const auto &[name, done] : replaced)
    if (!done && !byName.at(name)->optional) {
      error = "'" + name + "' is not an initializer of the model's graph";
      return false;
    }
  out = std::move(result);
  return true;
}

namespace {

/// The string in a length-delimited field.
std::string fieldString(const unsigned char *data, const Field &field) {
  return std::string(reinterpret_cast<const char *>(data + field.payloadBegin),
                     field.end - field.payloadBegin);
}

/// The fields of the message in [begin, end), or false with `error`.
bool readFields(const unsigned char *data, size_t begin, size_t end,
                std::vector<Field> &fields, std::string &error) {
  FieldReader reader(data, begin, end, error);
  Field field;
  while (!reader.atEnd()) {
    if (!reader.next(field))
      return false;
    fields.push_back(field);
  }
  return true;
}

bool stringField(const Field &field, const char *what, std::string &error) {
  if (field.wireType == kLengthDelimited)
    return true;
  error = std::string("malformed ONNX model: a node's ") + what +
          " is not a string";
  return false;
}

/// Names the graph reads: node inputs and graph outputs (main graph).
bool namesRead(const unsigned char *data, const std::vector<Field> &graph,
               std::map<std::string, bool> &read, std::string &error) {
  for (const Field &g : graph) {
    if (g.number != kGraphNode && g.number != kGraphOutput)
      continue;
    if (g.wireType != kLengthDelimited) {
      error = "malformed ONNX model: a node or output is not a message";
      return false;
    }
    std::vector<Field> fields;
    if (!readFields(data, g.payloadBegin, g.end, fields, error))
      return false;
    uint32_t wanted = g.number == kGraphNode ? kNodeInput : kValueInfoName;
    for (const Field &f : fields)
      if (f.number == wanted) {
        if (!stringField(f, "input", error))
          return false;
        read[fieldString(data, f)] = true;
      }
  }
  return true;
}

/// The NodeProto in `node` as it runs in eval mode, appended to `out`.
bool evalNode(const unsigned char *data, const Field &node,
              const std::map<std::string, bool> &read, std::string &out,
              std::string &error) {
  std::vector<Field> fields;
  if (!readFields(data, node.payloadBegin, node.end, fields, error))
    return false;
  std::string opType, domain, nodeName;
  for (const Field &f : fields) {
    if (f.number == kNodeOpType || f.number == kNodeDomain || f.number == 3) {
      if (!stringField(f, "op_type, domain or name", error))
        return false;
      (f.number == kNodeOpType ? opType
                               : f.number == kNodeDomain ? domain : nodeName) =
          fieldString(data, f);
    }
  }
  bool batchNorm = opType == "BatchNormalization",
       dropout = opType == "Dropout";
  auto copy = [&](const Field &f) {
    out.append(reinterpret_cast<const char *>(data + f.begin), f.end - f.begin);
  };
  if ((!batchNorm && !dropout) || (!domain.empty() && domain != "ai.onnx")) {
    copy(node);
    return true;
  }
  std::string body;
  int inputs = 0, outputs = 0;
  for (const Field &f : fields) {
    auto keep = [&] {
      body.append(reinterpret_cast<const char *>(data + f.begin),
                  f.end - f.begin);
    };
    if (f.number == kNodeInput && dropout) {
      if (!stringField(f, "input", error))
        return false;
      if (inputs++ != 2) // Dropout's training_mode goes.
        keep();
      continue;
    }
    if (f.number == kNodeOutput && batchNorm) {
      if (!stringField(f, "output", error))
        return false;
      std::string name = fieldString(data, f);
      if (outputs++ == 0) {
        keep();
        continue;
      }
      if (!name.empty() && read.count(name)) {
        error = "cannot write the eval-mode model: BatchNormalization node '" +
                nodeName + "' has its running statistics '" + name +
                "' read by the graph";
        return false;
      }
      continue;
    }
    if (f.number == kNodeAttribute && batchNorm) {
      if (f.wireType != kLengthDelimited) {
        error = "malformed ONNX model: a node's attribute is not a message";
        return false;
      }
      std::vector<Field> attribute;
      if (!readFields(data, f.payloadBegin, f.end, attribute, error))
        return false;
      bool trainingMode = false;
      for (const Field &a : attribute)
        if (a.number == kAttributeName && a.wireType == kLengthDelimited &&
            fieldString(data, a) == "training_mode")
          trainingMode = true;
      if (trainingMode) {
        std::string rewritten;
        putLengthDelimited(rewritten, kAttributeName, "training_mode");
        putKey(rewritten, kAttributeInt, kVarint);
        putVarint(rewritten, 0);
        putKey(rewritten, kAttributeType, kVarint);
        putVarint(rewritten, kAttributeTypeInt);
        putLengthDelimited(body, kNodeAttribute, rewritten);
        continue;
      }
    }
    keep();
  }
  putLengthDelimited(out, kGraphNode, body);
  return true;
}

} // namespace

bool rewriteOnnxEvalMode(const unsigned char *model, size_t size,
                         std::string &out, std::string &error) {
  return rewriteModelGraph(
      model, size, out, error,
      [&](size_t begin, size_t end, std::string &rewritten) {
        std::vector<Field> graph;
        std::map<std::string, bool> read;
        if (!readFields(model, begin, end, graph, error) ||
            !namesRead(model, graph, read, error))
          return false;
        for (const Field &g : graph) {
          if (g.number == kGraphNode && g.wireType == kLengthDelimited) {
            if (!evalNode(model, g, read, rewritten, error))
              return false;
            continue;
          }
          rewritten.append(reinterpret_cast<const char *>(model + g.begin),
                           g.end - g.begin);
        }
        return true;
      });
}

} // namespace ampc::runtime

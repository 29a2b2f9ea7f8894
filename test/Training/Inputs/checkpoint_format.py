"""A reader of ampc checkpoints (format version 1, documented at the top of
lib/Runtime/Checkpoint.cpp), written from that description: magic, version,
tensor count T, header size H, file size F, model name, T table entries
(name, dtype, rank, dimensions, byte count), the data back to back from H,
and an FNV-1a 64 checksum of everything before it."""
import struct

import numpy as np

DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 10: np.float16,
          11: np.float64, 16: np.uint16}


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def read(path, verify_checksum=True):
    """(model name, {tensor name: numpy array}) in table order; raises
    ValueError when the file does not follow the format."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"AMPCCKPT":
        raise ValueError("bad magic")
    version, count, header, size = struct.unpack_from("<IIQQ", data, 8)
    if version != 1 or size != len(data):
        raise ValueError("version %d, size %d of %d" % (version, size,
                                                       len(data)))
    offset = 32
    (n,) = struct.unpack_from("<I", data, offset)
    name = data[offset + 4:offset + 4 + n].decode()
    offset += 4 + n
    table = []
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, offset)
        tensor = data[offset + 4:offset + 4 + n].decode()
        offset += 4 + n
        dtype, rank = struct.unpack_from("<iI", data, offset)
        offset += 8
        shape = struct.unpack_from("<%dq" % rank, data, offset)
        offset += 8 * rank
        (nbytes,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        table.append((tensor, dtype, shape, nbytes))
    if offset != header:
        raise ValueError("header ends at %d, H says %d" % (offset, header))
    tensors = {}
    for tensor, dtype, shape, nbytes in table:
        raw = data[offset:offset + nbytes]
        tensors[tensor] = np.frombuffer(raw, DTYPES[dtype]).reshape(shape)
        offset += nbytes
    if offset + 8 != size:
        raise ValueError("the sizes do not add up")
    if verify_checksum:
        (checksum,) = struct.unpack_from("<Q", data, offset)
        if checksum != fnv1a64(data[:offset]):
            raise ValueError("checksum mismatch")
    return name, tensors


def changed(before, after):
    """Names of the tensors whose bytes differ between two reads."""
    return [n for n in before if before[n].tobytes() != after[n].tobytes()]

#!/usr/bin/env python3
"""Writes a copy of an ampc checkpoint with one scalar changed and a valid
checksum, as an attacker who knows the format would (lib/Runtime/
Checkpoint.cpp documents it).

usage: forge_checkpoint.py IN OUT NAME VALUE   (VALUE: a float or an int,
                                                nan/inf allowed)
"""
import struct
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from checkpoint_format import fnv1a64  # noqa: E402

FORMATS = {1: "<f", 6: "<i", 7: "<q", 11: "<d"}


def main():
    src, dst, name, value = sys.argv[1:5]
    data = bytearray(open(src, "rb").read())
    count, header = struct.unpack_from("<IQ", data, 12)
    pos = 32
    (n,) = struct.unpack_from("<I", data, pos)
    pos += 4 + n
    offset = header
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        tensor = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        dtype, rank = struct.unpack_from("<iI", data, pos)
        pos += 8 + 8 * rank
        (nbytes,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        if tensor == name:
            fmt = FORMATS[dtype]
            v = float(value) if fmt in ("<f", "<d") else int(value)
            struct.pack_into(fmt, data, offset, v)
            struct.pack_into("<Q", data, len(data) - 8,
                             fnv1a64(bytes(data[:-8])))
            open(dst, "wb").write(bytes(data))
            return
        offset += nbytes
    sys.exit("no tensor '%s'" % name)


if __name__ == "__main__":
    main()

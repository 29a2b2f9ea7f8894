#!/usr/bin/env python3
"""Where a model library keeps its embedded blobs (the parameters, the
ONNX model): each in the large read-only section .lrodata, which must lie
after every section the code reaches with 32-bit PC-relative references
(.text, .rodata, .data, .got, .bss), and the code reaches each blob through
an 8-byte pointer in .data.rel.ro. Then a blob of any size leaves the code's
references in range: in .rodata a blob of 2 GiB or more failed the link
("relocation truncated to fit"; over_2gib.py builds such a model).

usage: blob_sections.py LIB.so   (readelf from binutils)
Prints the section order and "ok" or "FAILED: why".
"""
import subprocess
import sys

lib = sys.argv[1]
out = subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True,
                     check=True).stdout
sections = {}
for line in out.splitlines():
    parts = line.replace("[ ", "[").split()
    if len(parts) > 4 and parts[0].startswith("[") and parts[1].startswith("."):
        sections[parts[1]] = (int(parts[3], 16), int(parts[5], 16))
near = [s for s in (".text", ".rodata", ".data.rel.ro", ".got", ".data",
                    ".bss") if s in sections]
problems = []
if ".lrodata" not in sections:
    problems.append("no .lrodata section")
else:
    start = sections[".lrodata"][0]
    for s in near:
        address, size = sections[s]
        if address + size > start:
            problems.append("%s ends after .lrodata starts" % s)
    # The blobs: the parameters at least (a training library also carries
    # its ONNX model).
    if sections[".lrodata"][1] < 64:
        problems.append(".lrodata holds %d bytes" % sections[".lrodata"][1])
order = sorted(near + [".lrodata"] * (".lrodata" in sections),
               key=lambda s: sections[s][0])
print("sections: " + " ".join(order))
print("FAILED: " + "; ".join(problems) if problems else "ok")
sys.exit(1 if problems else 0)

"""Checks ampc.Status and ampc.Dtype against include/ampc/Runtime/ampc.h
(header-constants.test): the header's ampc_status and ampc_dtype enums
name the same members as the Python enums (parsed from the header), and a
C program compiled against the header prints the values Python holds.

usage: c_constants.py SRC_ROOT WORK_DIR
"""
import os
import re
import subprocess
import sys

import ampc

src, work = sys.argv[1], sys.argv[2]
header = os.path.join(src, "include", "ampc", "Runtime", "ampc.h")
text = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(header).read(), flags=re.S)
failed = False
for enum_name, python_enum, prefix in (("ampc_status", ampc.Status, "AMPC_"),
                                       ("ampc_dtype", ampc.Dtype,
                                        "AMPC_DTYPE_")):
    body = re.search(r"enum %s\b[^{]*\{(.*?)\}" % enum_name, text, re.S)
    in_c = re.findall(r"\b(AMPC_\w+)", body.group(1))
    in_python = [prefix + m.name for m in python_enum]
    wrong = 0
    if in_c != in_python:
        print("%s: the header names %s, Python %s" % (enum_name, in_c,
                                                       in_python))
        wrong += 1
    # The values as the C compiler sees them.
    program = os.path.join(work, enum_name + ".c")
    with open(program, "w") as f:
        f.write('#include <stdio.h>\n#include "ampc/Runtime/ampc.h"\n'
                "int main(void) {\n")
        for name in in_c:
            f.write('  printf("%%s %%d\\n", "%s", (int)%s);\n' % (name, name))
        f.write("  return 0;\n}\n")
    binary = program[:-2]
    subprocess.run(["cc", "-I", os.path.join(src, "include"), program, "-o",
                    binary], check=True)
    values = dict(line.split() for line in subprocess.run(
        [binary], capture_output=True, text=True, check=True).stdout
        .splitlines())
    for member in python_enum:
        c_value = values.get(prefix + member.name)
        if c_value is None or int(c_value) != member.value:
            print("%s%s: C %s, Python %d" % (prefix, member.name, c_value,
                                             member.value))
            wrong += 1
    if wrong == 0:
        print("%s: %d values match" % (enum_name, len(values)))
    failed = failed or wrong > 0
sys.exit(1 if failed else 0)

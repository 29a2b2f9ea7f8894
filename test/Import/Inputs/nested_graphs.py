#!/usr/bin/env python3
"""Writes an .onnxtext model whose If nodes nest N graphs deep (usage:
nested_graphs.py OUT N): the ONNX text parser recurses once per level, so a
deep one overflowed the stack before ampc measured the nesting first."""
import sys
n = int(sys.argv[2])
leaf = 'e () => (float[1] z) { z = Identity (x) }'
g = leaf
for k in range(n):
    g = 'g%d () => (float[1] z) { z = If <then_branch = %s, else_branch = %s> (c) }' % (k, g, leaf)
text = ('<ir_version: 8, opset_import: ["" : 17]>\nm (float[1] x, bool c) => (float[1] y) {\n'
        '  y = If <then_branch = %s, else_branch = %s> (c)\n}\n' % (g, leaf))
open(sys.argv[1], 'w').write(text)

#!/usr/bin/env python3
"""Writes an .onnxtext model whose If nodes nest N graphs deep (usage:
nested_graphs.py OUT N): the ONNX text parser recurses once per level, so a
deep one overflowed the stack before ampc measured the nesting first.

The text is built from its N opening and N closing pieces, in linear time
(wrapping the whole text once per level copied it N times: 76 s for 20,000
levels)."""
import sys
n = int(sys.argv[2])
leaf = 'e () => (float[1] z) { z = Identity (x) }'
# Level k wraps level k-1: 'gk ... then_branch = ' + inner + ', else_branch
# = leaf> (c) }'. So the openings go outermost first, the closings innermost
# first.
opens = ['g%d () => (float[1] z) { z = If <then_branch = ' % k
         for k in reversed(range(n))]
close = ', else_branch = %s> (c) }' % leaf
g = ''.join(opens) + leaf + close * n
text = ('<ir_version: 8, opset_import: ["" : 17]>\nm (float[1] x, bool c) => (float[1] y) {\n'
        '  y = If <then_branch = %s, else_branch = %s> (c)\n}\n' % (g, leaf))
open(sys.argv[1], 'w').write(text)

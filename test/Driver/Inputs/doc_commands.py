#!/usr/bin/env python3
"""Runs the `ampc` commands a documentation page shows, on a real model.

usage: doc_commands.py DOC.md MODEL WORKDIR

Every indented line of DOC.md that starts with `ampc model.onnx` or
`ampc explain model.onnx` is run in WORKDIR with model.onnx replaced by
MODEL (the `# comment` dropped); each must exit 0, and each file it names
with -o or --report must exist and be non-empty afterwards. Prints one line
per command: "ok: COMMAND (FILES)".
"""
import os
import re
import shlex
import subprocess
import sys


def main():
    doc, model, work = sys.argv[1:4]
    commands = []
    for line in open(doc, encoding="utf-8"):
        if not line.startswith("    ampc "):
            continue
        text = line.split("#", 1)[0].strip()
        words = shlex.split(text)
        if "model.onnx" not in words:
            continue
        commands.append(words)
    if not commands:
        sys.exit("FAIL: no `ampc ... model.onnx` command in %s" % doc)
    failed = False
    for words in commands:
        files = []
        for i, w in enumerate(words):
            if w == "-o" and i + 1 < len(words):
                files.append(words[i + 1])
            elif w.startswith("--report="):
                files.append(w.split("=", 1)[1])
        for f in files:
            if os.path.exists(os.path.join(work, f)):
                os.remove(os.path.join(work, f))
        run = [os.path.abspath(model) if w == "model.onnx" else w
               for w in words]
        p = subprocess.run(run, cwd=work, capture_output=True, text=True)
        missing = [f for f in files
                   if not os.path.isfile(os.path.join(work, f)) or
                   os.path.getsize(os.path.join(work, f)) == 0]
        shown = " ".join(words)
        if p.returncode != 0 or missing:
            failed = True
            print("FAIL: %s: exit %d, missing %s: %s" % (
                shown, p.returncode, missing,
                (p.stderr.strip().splitlines() or [""])[0]))
        else:
            print("ok: %s (%s)" % (shown, ", ".join(files) or "stdout"))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()

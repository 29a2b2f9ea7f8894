"""Prints the ```python blocks of a Markdown file, one after another, so
that a test runs the code a page shows."""
import sys

inside = False
with open(sys.argv[1]) as f:
    for line in f:
        if line.startswith("```"):
            inside = line.strip() == "```python"
            continue
        if inside:
            sys.stdout.write(line)

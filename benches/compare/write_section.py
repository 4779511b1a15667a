"""Replaces (or appends) one section of a Markdown file, between the markers that
rca_eval::docs::write_section uses, with the command that wrote it on top.

    python3 write_section.py FILE NAME COMMAND BODY
"""
import os
import sys

path, name, cmd, body = sys.argv[1:]
# The rule of docs/benchmarks.md, as rca_eval::docs::standing_of checks it.
if not any(w in body.lower() for w in ("measures", "demonstrates", "demonstration")) \
        or not any(w in body.lower() for w in ("baseline", "trivial")):
    sys.exit(f"section {name}: the body must say whether it measures or demonstrates, "
             "and which baseline it beats (or why none applies)")
begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
section = f"{begin}\n_Written by `{cmd}`._\n\n{body}\n{end}"
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
if begin in text and end in text:
    a, b = text.index(begin), text.index(end) + len(end)
    text = text[:a] + section + text[b:]
else:
    text = text.rstrip() + "\n\n" + section + "\n"
open(path + ".tmp", "w").write(text)
os.replace(path + ".tmp", path)

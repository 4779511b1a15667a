"""Drain3's cluster id for every line of a file, one a line, for grouping accuracy.

The configuration is the reference harness's own (../shared/bench/drain3_reference.py): its
configuration block is read from that file and run here, so the groups scored are those of
the configuration whose speed is timed. This run is not timed.

usage: python3 drain3_groups.py REFERENCE_PY INPUT OUT
"""
import sys

MARK = "lines = open("


def main():
    reference, input_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    source = open(reference, encoding="utf-8").read()
    if MARK not in source:
        sys.exit(f"{reference}: no {MARK!r} line ends its configuration block")
    scope = {}
    exec(compile(source[: source.index(MARK)], reference, "exec"), scope)
    miner = scope["TemplateMiner"](config=scope["c"])
    # One group a "\n"-ended line, as the truth and the other miner count lines.
    with open(input_path, encoding="utf-8", newline="\n") as f, \
            open(out, "w", encoding="utf-8") as o:
        for line in f:
            line = line.rstrip("\n")
            o.write(f"{miner.add_log_message(line)['cluster_id']}\n")


if __name__ == "__main__":
    main()

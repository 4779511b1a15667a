"""The true group of every line of the throughput input, so both miners' grouping accuracy can
be printed beside their speed.

The input (../shared/bench/loghub_speed_input.py, seeded) takes runs of Loghub-2k lines from
randomly chosen systems and redraws every digit. This script replays the same seeded draws
over the same data, checks that each line it rebuilds equals the input's line (so the labels
belong to that file and no other), and writes the label of each line:

  OUT.original   SYSTEM/EventId             (the Loghub labels)
  OUT.corrected  SYSTEM/EventTemplate       (the corrected labels, where a system ships them;
                                             otherwise SYSTEM/EventId)

A label carries its system: two systems' events are never one group.

usage: python3 labelled_input.py DATA_DIR INPUT OUT_PREFIX
  DATA_DIR: the loghub-2k folder the input was built from; INPUT: the built input.
Exit status 1, with the first differing line, when INPUT is not what the draws rebuild.
"""
import csv
import os
import random
import re
import sys


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def main():
    data, input_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    systems = sorted(s for s in os.listdir(data) if os.path.isdir(os.path.join(data, s)))
    content, original, corrected = {}, {}, {}
    for s in systems:
        rows = read_rows(os.path.join(data, s, f"{s}_2k.log_structured.csv"))
        content[s] = [r["Content"] for r in rows]
        original[s] = [f"{s}/{r['EventId']}" for r in rows]
        fixed = os.path.join(data, s, f"{s}_2k.log_structured_corrected.csv")
        if os.path.exists(fixed):
            corrected[s] = [f"{s}/{r['EventTemplate']}" for r in read_rows(fixed)]
        else:
            corrected[s] = original[s]
        if not (len(content[s]) == len(original[s]) == len(corrected[s]) == 2000):
            sys.exit(f"{s}: expected 2000 labelled rows in each file")
    # The same seeds and the same order of draws as loghub_speed_input.py.
    rng, drng, digit = random.Random(42), random.Random(44), re.compile(r"\d")
    n = 0
    with open(input_path, encoding="utf-8", newline="\n") as given, \
            open(out + ".original", "w", encoding="utf-8") as o, \
            open(out + ".corrected", "w", encoding="utf-8") as c:
        lines = iter(given)
        done = False
        while not done:
            s, start, run = rng.choice(systems), rng.randrange(2000), rng.randint(20, 400)
            for k in range(run):
                got = next(lines, None)
                if got is None:
                    done = True
                    break
                row = (start + k) % 2000
                line = content[s][row].replace("\r", " ").replace("\n", " ")
                rebuilt = digit.sub(lambda _m: str(drng.randrange(10)), line)
                if got.rstrip("\n") != rebuilt:
                    sys.exit(f"line {n + 1} of {input_path} is not what the draws rebuild "
                             f"({s} row {row + 1}):\n  input:   {got.rstrip()!r}\n  rebuilt: {rebuilt!r}")
                o.write(original[s][row].replace("\n", " ") + "\n")
                c.write(corrected[s][row].replace("\n", " ") + "\n")
                n += 1
    print(f"labelled {n} lines", file=sys.stderr)


if __name__ == "__main__":
    main()

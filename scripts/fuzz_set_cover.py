#!/usr/bin/env python3
"""The smallest set of fuzz inputs that keeps every coverage feature: a greedy set cover over
the per-input features a libFuzzer merge records in its control file.

libFuzzer's -merge=1 (clang 14) keeps every input that adds a feature in the order it meets
them, which leaves thousands of inputs that later ones make redundant. This reads
-merge_control_file's FT lines (the features of each input), keeps the named seeds given,
then repeatedly takes the input with the most features not yet covered (the smaller on a tie)
until every feature is covered. scripts/fuzz --minimize <target> runs it.

Usage: fuzz_set_cover.py CONTROL_FILE OUT_DIR [KEEP_NAME ...]
"""

import shutil
import sys
from pathlib import Path


def read_control(path):
    """[(file, size, features)] from a libFuzzer merge control file."""
    lines = Path(path).read_text().splitlines()
    count = int(lines[0])
    files = lines[2:2 + count]
    sizes, features = {}, {}
    for line in lines[2 + count:]:
        parts = line.split()
        if parts[0] == "STARTED":
            sizes[int(parts[1])] = int(parts[2])
        elif parts[0] == "FT":
            features[int(parts[1])] = set(map(int, parts[2:]))
    return [(files[i], sizes.get(i, 0), features.get(i, set())) for i in range(count)]


def cover(inputs, keep):
    chosen = [i for i, (f, _, _) in enumerate(inputs) if Path(f).name in keep]
    covered = set().union(*(inputs[i][2] for i in chosen)) if chosen else set()
    every = set().union(*(ft for _, _, ft in inputs))
    while covered != every:
        best = max((i for i in range(len(inputs)) if i not in chosen),
                   key=lambda i: (len(inputs[i][2] - covered), -inputs[i][1]))
        chosen.append(best)
        covered |= inputs[best][2]
    return chosen, len(every)


def main():
    control, out = sys.argv[1], Path(sys.argv[2])
    keep = set(sys.argv[3:])
    inputs = read_control(control)
    chosen, features = cover(inputs, keep)
    out.mkdir(parents=True, exist_ok=True)
    for i in chosen:
        shutil.copy(inputs[i][0], out / Path(inputs[i][0]).name)
    print(f"fuzz_set_cover: {len(chosen)} of {len(inputs)} inputs cover all {features} features "
          f"({len(keep)} named seeds kept)")


if __name__ == "__main__":
    main()

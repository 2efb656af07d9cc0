#!/usr/bin/env python3
"""The docs' transcripts of `remat simulate` are what it prints today.

A transcript is a fenced block of docs/*.md that starts with `$ remat simulate
…` (a trailing backslash continues the line) and holds the output after it.
simulate is deterministic, so the block must equal the output line for line;
`remat run`'s transcripts hold times and are left alone. A figure that moved
with the memory model then fails here instead of staying in the docs.
Usage: docs_transcripts.py REMAT REPO
"""
import glob
import os
import subprocess
import sys


def transcripts(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    k = 0
    while k < len(lines):
        if lines[k].startswith("$ remat simulate "):
            first = k + 1
            cmd = lines[k][len("$ remat "):]
            while cmd.endswith("\\"):
                cmd = cmd[:-1].rstrip() + " " + lines[k + 1].strip()
                k += 1
            end = next(e for e in range(k + 1, len(lines)) if lines[e].startswith("```"))
            yield first, cmd, lines[k + 1:end]
            k = end
        k += 1


def main():
    remat, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    failed = checked = 0
    for path in sorted(glob.glob(os.path.join(repo, "docs", "*.md"))):
        for line, cmd, want in transcripts(path):
            checked += 1
            got = subprocess.run([remat] + cmd.split(), cwd=repo, capture_output=True, text=True)
            out = got.stdout.rstrip("\n").split("\n")
            if got.returncode != 0 or out != want:
                failed += 1
                where = f"{os.path.relpath(path, repo)}:{line}"
                print(f"{where}: `remat {cmd}` prints otherwise (exit {got.returncode}){got.stderr.strip()}")
                for n, (a, b) in enumerate(zip(want, out)):
                    if a != b:
                        print(f"  first difference, output line {n + 1}:\n  docs: {a}\n  now:  {b}")
                        break
                else:
                    print(f"  docs have {len(want)} lines, the output {len(out)}")
    print(f"{checked} transcripts checked, {failed} out of date")
    if checked == 0:
        print("no transcript found: has the docs' layout changed?")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""readme_samples.py [--update] BIN_DIR [README]: the README's sample outputs, checked.

A sample is a fenced block right after a line `<!-- sample: TOOL ARGS... -->`. The command
runs as BIN_DIR/TOOL ARGS from the source folder (the README's folder), so ARGS name
fixtures by their paths in the tree; its stdout must equal the block. A sample must run
without a device: `--replay` of a captured host or connection. Nothing is normalised, so a
sample must come from a fixture whose output is the same on every host.

--update rewrites each block with the command's output instead (read the diff before
committing it). Exit 0 when every block matches (or was rewritten), 1 when one differs or
its command fails, 2 on a malformed README or bad arguments.
"""

import difflib
import os
import re
import shlex
import subprocess
import sys

MARKER = re.compile(r"^<!-- sample: (?P<command>.+?) -->$")
# The tools' exit codes that still come with a complete report: 0 works, 1 cause found,
# 3 not explained. Anything else (2 usage, 77 no device, a crash) is not a sample.
REPORT_EXITS = (0, 1, 3)


class ReadmeError(Exception):
    pass


def find_samples(lines):
    """Yields (command, first line of the block's body, line after its closing fence)."""
    for index, line in enumerate(lines):
        match = MARKER.match(line.rstrip("\n"))
        if not match:
            continue
        fence = index + 1
        if fence >= len(lines) or lines[fence].rstrip("\n") != "```":
            raise ReadmeError(f"line {index + 1}: a sample marker must be followed by a plain ``` fence")
        end = fence + 1
        while end < len(lines) and lines[end].rstrip("\n") != "```":
            end += 1
        if end == len(lines):
            raise ReadmeError(f"line {fence + 1}: the sample's block is never closed")
        yield match.group("command"), fence + 1, end


def run_sample(command, bin_dir, source_dir):
    words = shlex.split(command)
    if not words or "/" in words[0]:
        raise ReadmeError(f"'{command}': the first word must be a tool in {bin_dir}")
    result = subprocess.run([os.path.join(bin_dir, words[0])] + words[1:], cwd=source_dir,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                            check=False)
    if result.returncode not in REPORT_EXITS:
        raise ReadmeError(f"'{command}' exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def main(argv):
    update = "--update" in argv
    arguments = [a for a in argv if a != "--update"]
    if len(arguments) not in (1, 2) or arguments[0].startswith("-"):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    bin_dir = os.path.abspath(arguments[0])
    here = os.path.dirname(os.path.abspath(__file__))
    readme = os.path.abspath(arguments[1] if len(arguments) == 2
                             else os.path.join(here, "..", "..", "README.md"))
    source_dir = os.path.dirname(readme)
    with open(readme, encoding="utf-8") as file:
        lines = file.readlines()

    try:
        samples = list(find_samples(lines))
    except ReadmeError as error:
        print(f"{readme}: {error}", file=sys.stderr)
        return 2
    if not samples:
        print(f"{readme}: no <!-- sample: ... --> markers", file=sys.stderr)
        return 1

    failed = 0
    # From the last block up, so that rewriting one leaves the line numbers above it valid.
    for command, begin, end in reversed(samples):
        try:
            output = run_sample(command, bin_dir, source_dir)
        except (ReadmeError, OSError, subprocess.TimeoutExpired) as error:
            print(f"{readme}:{begin}: {error}", file=sys.stderr)
            failed += 1
            continue
        expected = "".join(lines[begin:end])
        if output and not output.endswith("\n"):
            output += "\n"
        if output == expected:
            print(f"ok: {command}")
        elif update:
            lines[begin:end] = output.splitlines(keepends=True)
            print(f"updated: {command}")
        else:
            print(f"{readme}:{begin}: '{command}' prints something else now:", file=sys.stderr)
            sys.stderr.writelines(difflib.unified_diff(expected.splitlines(keepends=True),
                                                       output.splitlines(keepends=True),
                                                       "README", command))
            failed += 1

    if update:
        with open(readme, "w", encoding="utf-8") as file:
            file.writelines(lines)
    if failed:
        print(f"{failed} of {len(samples)} sample(s) differ or failed; "
              "python3 tests/docs/readme_samples.py --update build/bin rewrites them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

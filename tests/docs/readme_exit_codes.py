#!/usr/bin/env python3
"""readme_exit_codes.py [SOURCE_DIR]: the README's exit-code table against the code and man page.

The codes must be the same three times: the README's table (section "Exit codes"), the
ExitCode enum in lib/base/error.hpp, and the EXIT STATUS table of man/rdmakit.7. Each code's
meaning in the README must be the man page's text, word for word once troff's escapes and
Markdown's code and bold marks are taken out. Exit 0 when all agree, 1 with each difference.
"""

import os
import re
import sys


def plain(text):
    """Text without troff escapes or Markdown marks, its white space collapsed."""
    text = re.sub(r"\\f[BIRP]", "", text)
    text = text.replace("\\-", "-").replace("\\(em", "—").replace("`", "").replace("**", "")
    return " ".join(text.split())


def section(path, heading, next_heading, name):
    """The text under `heading` (a regex line) up to the next `next_heading` or the end."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    found = re.search(rf"^{heading}\n(.*?)(?=^{next_heading}|\Z)", text, re.M | re.S)
    if not found:
        raise ValueError(f"{path}: no {name} section")
    return found.group(1)


def readme_codes(path):
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", section(path, "## Exit codes", "## ", "'## Exit codes'"), re.M)
    return {int(code): plain(meaning) for code, meaning in rows}


def enum_codes(path):
    with open(path, encoding="utf-8") as file:
        text = file.read()
    body = re.search(r"enum class ExitCode : int \{(.*?)\};", text, re.S)
    if not body:
        raise ValueError(f"{path}: no 'enum class ExitCode'")
    return {int(value) for value in re.findall(r"^\s*\w+ = (\d+),", body.group(1), re.M)}


def man_codes(path):
    rows = re.findall(r"^(\d+)\tT\{\n(.*?)\nT\}$", section(path, r"\.SH EXIT STATUS", r"\.SH ", "EXIT STATUS"), re.M | re.S)
    if not rows:
        raise ValueError(f"{path}: no 'CODE<TAB>T{{ ... T}}' rows under EXIT STATUS")
    return {int(code): plain(meaning) for code, meaning in rows}


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.abspath(argv[0] if argv else os.path.join(here, "..", ".."))
    readme_path = os.path.join(source, "README.md")
    enum_path = os.path.join(source, "lib", "base", "error.hpp")
    man_path = os.path.join(source, "man", "rdmakit.7")
    try:
        readme = readme_codes(readme_path)
        enum = enum_codes(enum_path)
        man = man_codes(man_path)
    except (OSError, ValueError) as error:
        print(error, file=sys.stderr)
        return 1

    problems = []
    if set(readme) != enum:
        problems.append(f"README.md lists codes {sorted(readme)}, lib/base/error.hpp's ExitCode {sorted(enum)}")
    if set(man) != enum:
        problems.append(f"man/rdmakit.7 lists codes {sorted(man)}, lib/base/error.hpp's ExitCode {sorted(enum)}")
    for code in sorted(set(readme) & set(man)):
        if readme[code] != man[code]:
            problems.append(f"exit {code}: README.md says '{readme[code]}', man/rdmakit.7 says '{man[code]}'")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"exit codes {sorted(enum)} agree in README.md, lib/base/error.hpp and man/rdmakit.7")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

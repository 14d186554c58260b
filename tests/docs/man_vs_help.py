#!/usr/bin/env python3
"""A man page's OPTIONS against the tool's --help: the same option names, short and long
alike, and the same default wherever both state one.

usage: man_vs_help.py PROGRAM MAN_PAGE    (build/bin/send_bw man/send_bw.1)

The man page may list names that --help hides (a second spelling kept for another tool's
users) when its OPTIONS section declares them on a roff comment line:
    .\\" hidden: --report_gbits --out_json
Exit 0 when they agree, 1 with one line per difference."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roff  # noqa: E402


def compare(help_text, man_path):
    problems = []
    helped = roff.help_options(help_text)
    entries, hidden = roff.man_options(man_path)
    help_names = {name for option in helped for name in option.names}
    man_names = {name for entry in entries for name in entry.names}
    page = os.path.basename(man_path)
    for name in sorted(help_names - man_names):
        problems.append(f"{name}: in --help, not in {page} OPTIONS")
    for name in sorted(man_names - help_names - hidden):
        problems.append(f"{name}: in {page} OPTIONS, not in --help (declare it with '.\\\" hidden:' if it is hidden)")
    for name in sorted(hidden & help_names):
        problems.append(f"{name}: declared hidden in {page}, but --help shows it")
    by_name = {name: option for option in helped for name in option.names}
    for entry in entries:
        # An entry about several options ("--json, --timeout, --log-level") states no
        # single default: only an entry of one option's names is compared.
        options = {id(by_name[n]): by_name[n] for n in entry.names if n in by_name}
        if len(options) != 1:
            continue
        option = next(iter(options.values()))
        stated = roff.man_default(entry.text())
        if option.default is None or stated is None:
            continue
        if not roff.same_value(option.default, stated):
            names = ",".join(option.names)
            problems.append(f"{names}: --help says default {option.default}, {page} says {stated}")
    return problems


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    program, man_path = argv[1], argv[2]
    tool = os.path.basename(man_path).rsplit(".", 1)[0]
    problems = compare(roff.tool_help(program), man_path)
    for problem in problems:
        print(f"{tool}: {problem}")
    if problems:
        print(f"{tool}: {len(problems)} difference(s) between {program} --help and {man_path}")
        return 1
    print(f"{tool}: {program} --help and {man_path} agree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

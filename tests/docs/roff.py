"""Reading the man pages (man/*.1, man/rdmakit.7) and the tools' CLI11 --help, for the
docs checks beside this file. Standard library only: CI has no PyPI."""

import re
import subprocess

# An option name as a man page or --help spells it: -p, --port, --report_gbits.
OPTION_NAME = re.compile(r"(?<![\w-])(--[A-Za-z0-9][\w-]*|-[A-Za-z0-9])(?![\w-])")

# Declares names a tool accepts but hides from --help (CLI11 group ""), such as a
# second spelling kept for perftest's users: `.\" hidden: --report_gbits -F`. Without it
# a name in the man page that --help lacks is drift.
HIDDEN_DECLARATION = re.compile(r'^\.\\"\s*hidden:\s*(.*)$')


def plain(line):
    """A roff line as it reads: macro, font escapes, quotes and \\- removed."""
    line = re.sub(r"^\.[A-Za-z]+\s*", "", line)
    line = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", line)
    line = line.replace("\\-", "-").replace("\\(mu", "x").replace("\\(aq", "'")
    line = line.replace("\\&", "").replace("\\ ", " ").replace("\\e", "\\")
    return line.replace('"', "")


def section(lines, name):
    """The lines of section `name` (.SH name up to the next .SH), subsections included."""
    out = None
    for line in lines:
        if line.startswith(".SH"):
            if out is not None:
                break
            if plain(line).strip() == name:
                out = []
            continue
        if out is not None:
            out.append(line)
    return out


class ManEntry:
    """One tagged paragraph (.TP) of OPTIONS: the names in its tag and its text."""

    def __init__(self, tag, names):
        self.tag = tag
        self.names = names
        self.body = []

    def text(self):
        return " ".join(plain(line) for line in self.body if not line.startswith('.\\"'))


def man_options(path):
    """The OPTIONS entries of a man page that name at least one option, and the names
    it declares hidden."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    body = section(lines, "OPTIONS")
    if body is None:
        raise SystemExit(f"{path}: no .SH OPTIONS")
    entries, hidden, current, want_tag = [], set(), None, False
    for line in body:
        declared = HIDDEN_DECLARATION.match(line)
        if declared:
            hidden.update(OPTION_NAME.findall(declared.group(1)))
            continue
        if want_tag:
            want_tag = False
            names = OPTION_NAME.findall(plain(line))
            current = ManEntry(line, names) if names else None
            if current:
                entries.append(current)
            continue
        if line.startswith(".TP"):
            want_tag = True
            current = None
        elif line.startswith((".SS", ".PP", ".LP", ".P ")) or line == ".P":
            current = None
        elif current is not None:
            current.body.append(line)
    return entries, hidden


# A default in a man page's text: "(default 18515", "default 0: wait", "warn (default)",
# "RC (the default)", "bw (bandwidth, default)", "0 (the default) pings".
_DEFAULT_AFTER = re.compile(r"\bdefault\s+([^\s,;:()]+)")
_DEFAULT_BEFORE = re.compile(r"([\w.\-]+)\s+\((?:[^()]*,\s*)?(?:the\s+)?default\)")


def man_default(text):
    """The first default a man page entry states, or None."""
    found = []
    for pattern in (_DEFAULT_AFTER, _DEFAULT_BEFORE):
        match = pattern.search(text)
        if match:
            found.append((match.start(), match.group(1).rstrip(".")))
    return min(found)[1] if found else None


class HelpOption:
    def __init__(self, names, default):
        self.names = names
        self.default = default


# One option line of CLI11's help: names, then an optional type (TEXT, UINT:INT in [1 -
# 65535], ENUM:{bw,lat}, FILE:FILE), then an optional default: "=18515" (CLI11 2.1, Debian
# 12) or " [18515]" (later CLI11).
_HELP_LINE = re.compile(
    r"^  (?P<names>-[^\s]+)"
    r"(?:\s(?P<type>[A-Z]+(?::(?:\{[^}]*\}|[A-Z]+ in \[[^\]]*\]|[A-Z]+))?)"
    r"(?:=(?P<eq>[^\s]+)|\s\[(?P<bracket>[^\]]*)\])?)?"
)


def help_options(text):
    """The options in a CLI11 --help text (positionals are not options)."""
    options, in_options = [], False
    for line in text.splitlines():
        if not line.startswith(" "):
            in_options = line.rstrip() == "Options:"
            continue
        if not in_options:
            continue
        match = _HELP_LINE.match(line)
        if not match:
            continue
        names = [n for n in match.group("names").split(",") if n]
        default = match.group("eq") or match.group("bracket")
        options.append(HelpOption(names, default))
    return options


def tool_help(binary):
    result = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{binary} --help exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def same_value(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b

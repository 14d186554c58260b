#!/usr/bin/python3
"""openmetrics_check.py FILE|URL [FAMILY...]: the file (or what GET URL answers, as a scraper
would ask for it) is OpenMetrics text that Prometheus' own parser (Debian's
python3-prometheus-client) takes, ending in "# EOF", with every FAMILY named in it. Exit 1
with the parser's complaint otherwise."""

import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1].startswith("http://"):
        request = urllib.request.Request(sys.argv[1], headers={"Accept": "application/openmetrics-text"})
        with urllib.request.urlopen(request, timeout=10) as response:
            kind = response.headers.get("Content-Type", "")
            if not kind.startswith("application/openmetrics-text"):
                print(f"{sys.argv[1]}: Content-Type {kind!r}, not application/openmetrics-text")
                return 1
            text = response.read().decode("utf-8")
    else:
        with open(sys.argv[1], encoding="utf-8") as handle:
            text = handle.read()
    try:
        families = {family.name: family for family in text_string_to_metric_families(text)}
    except ValueError as error:
        print(f"{sys.argv[1]}: not OpenMetrics: {error}")
        return 1
    missing = [name for name in sys.argv[2:] if name not in families]
    if missing:
        print(f"{sys.argv[1]}: no {', '.join(missing)} among {', '.join(sorted(families))}")
        return 1
    samples = sum(len(family.samples) for family in families.values())
    print(f"{len(families)} families, {samples} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())

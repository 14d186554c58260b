#!/usr/bin/python3
"""openmetrics_check.py FILE|URL [FAMILY...]: the file (node_exporter's textfile) is Prometheus
text format 0.0.4 that Prometheus' own parser (Debian's python3-prometheus-client) takes, with
no OpenMetrics-only line (# EOF, # UNIT, stateset, info); what GET URL answers a scraper that
asks for OpenMetrics, as Prometheus does, is OpenMetrics ending in "# EOF", and to one that
asks for nothing, Prometheus text. Every FAMILY is named in it. Exit 1 with the parser's
complaint otherwise."""

import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families as text_families

PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                     "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def fetch(url, accept):
    headers = {"Accept": accept} if accept else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read().decode("utf-8")


def prometheus_text(name, text):
    """The families of Prometheus text, or an error for what node_exporter would refuse."""
    for line in text.splitlines():
        if line == "# EOF" or line.startswith("# UNIT ") or line.endswith((" stateset", " info")):
            raise ValueError(f"an OpenMetrics line in Prometheus text: {line!r}")
    return list(text_families(text))


def families_of(source):
    """The families a consumer reads from SOURCE, by name; raises ValueError for bad text."""
    if not source.startswith("http://"):
        with open(source, encoding="utf-8") as handle:
            return prometheus_text(source, handle.read())
    kind, text = fetch(source, PROMETHEUS_ACCEPT)
    if not kind.startswith("application/openmetrics-text"):
        raise ValueError(f"Content-Type {kind!r} to Prometheus' Accept, not application/openmetrics-text")
    families = list(openmetrics_families(text))
    kind, text = fetch(source, None)
    if not kind.startswith("text/plain; version=0.0.4"):
        raise ValueError(f"Content-Type {kind!r} with no Accept, not text/plain; version=0.0.4")
    prometheus_text(source, text)
    return families


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        families = {family.name: family for family in families_of(sys.argv[1])}
    except ValueError as error:
        print(f"{sys.argv[1]}: {error}")
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

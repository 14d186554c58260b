#!/usr/bin/python3
"""schema_check.py SCHEMA DOCUMENT [SCHEMA DOCUMENT...]: checks --json reports against their
schemas.

Exit 0 when every DOCUMENT (a file, or - for standard input) satisfies its SCHEMA, 1 with
one line a violation (after the document's name) when one does not,
2 when a file cannot be read. Several pairs in one call pay Python's start-up once, which
in an emulated guest costs seconds. The validator is Debian's
python3-jsonschema (draft 2020-12); the schemas' references to common.schema.json resolve
from the schema's own directory, never over the network.
"""

import json
import pathlib
import sys
import warnings

import jsonschema

# RefResolver is what Debian's jsonschema (4.10) offers; newer releases deprecate it.
warnings.simplefilter("ignore", DeprecationWarning)


def load(path):
    with open(path, encoding="utf-8") as source:
        return json.load(source)


def validator_for(schema_path):
    """A Draft 2020-12 validator for the schema at schema_path, its siblings preloaded."""
    schema_path = pathlib.Path(schema_path).resolve()
    store = {}
    for sibling in schema_path.parent.glob("*.schema.json"):
        store[sibling.as_uri()] = load(sibling)
    schema = store.get(schema_path.as_uri()) or load(schema_path)
    jsonschema.Draft202012Validator.check_schema(schema)
    resolver = jsonschema.RefResolver(base_uri=schema_path.as_uri(), referrer=schema, store=store)
    return jsonschema.Draft202012Validator(schema, resolver=resolver)


def violations(validator, document):
    """One line a violation: where in the document, and what is wrong there."""
    lines = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
        where = "/" + "/".join(str(part) for part in error.absolute_path)
        lines.append(f"{where}: {error.message}")
    return lines


def main(argv):
    pairs = argv[1:]
    if not pairs or len(pairs) % 2 != 0:
        print("usage: schema_check.py SCHEMA DOCUMENT [SCHEMA DOCUMENT...]", file=sys.stderr)
        return 2
    validators = {}
    status = 0
    for schema_path, document_path in zip(pairs[0::2], pairs[1::2]):
        try:
            if schema_path not in validators:
                validators[schema_path] = validator_for(schema_path)
            document = json.load(sys.stdin) if document_path == "-" else load(document_path)
        except (OSError, ValueError, jsonschema.SchemaError) as error:
            print(f"schema_check: {error}", file=sys.stderr)
            return 2
        for line in violations(validators[schema_path], document):
            print(f"{document_path}: {line}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))

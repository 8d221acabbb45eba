#!/usr/bin/env python3
"""The integration test targets of the build not named in scripts/test.sh's guest list.

    test-phases.py ARTIFACTS_JSON GUEST_TARGET...

ARTIFACTS_JSON is the output of `cargo test --workspace --no-run --message-format=json*`;
each GUEST_TARGET names an integration test target (as in `cargo test --test NAME`) whose
tests boot QEMU guests. Prints `--test NAME` for every other integration test target, one
per line, so scripts/test.sh runs them in its first phase, beside the deployed host's guest.
A guest target the build does not have is an error: the list would silently rot.
"""

import json
import sys


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    guests = set(sys.argv[2:])
    names = set()
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            target = msg.get("target") or {}
            if msg.get("reason") == "compiler-artifact" and target.get("kind") == ["test"]:
                names.add(target["name"])
    missing = sorted(guests - names)
    if missing:
        print(f"test-phases: no test target named {', '.join(missing)}", file=sys.stderr)
        return 1
    for name in sorted(names - guests):
        print(f"--test\n{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Keeps a persistent cargo target dir to what the current build uses (scripts/test.sh).

Cargo never deletes an artifact: every dependency bump or feature change leaves the old
unit's rlibs, test executables, build-script dirs and fingerprints behind, and a target dir
kept between CI runs grows until the disk is full (guests and containers then fail first).

    prune-target.py PROFILE_DIR ARTIFACTS_JSON...

PROFILE_DIR is e.g. $CARGO_TARGET_DIR/debug; each ARTIFACTS_JSON is the output of a cargo
command run with --message-format=json*, which lists every unit of the build, fresh or not.
A unit is named by the 16-hex-digit hash cargo gives its files and directories; under
deps/, examples/, build/ and .fingerprint/, whatever carries a hash no listed unit has is
removed. Names with no hash (the top-level binaries) are kept. With too few units listed
(a failed or empty build) nothing is removed.
"""

import json
import os
import re
import shutil
import sys

HASH = re.compile(r"-([0-9a-f]{16})(?=[./]|$)")


def hashes_of(path):
    return set(HASH.findall(path))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    profile, sources = sys.argv[1], sys.argv[2:]
    keep, units = set(), 0
    for src in sources:
        with open(src, encoding="utf-8") as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                msg = json.loads(line)
                reason = msg.get("reason")
                if reason == "compiler-artifact":
                    units += 1
                    for p in msg.get("filenames", []) + [msg.get("executable") or ""]:
                        keep |= hashes_of(p)
                elif reason == "build-script-executed":
                    units += 1
                    keep |= hashes_of(msg.get("out_dir", ""))
    if units < 50:
        print(f"prune-target: only {units} units listed; nothing removed")
        return 0
    removed, freed = 0, 0
    for sub in ("deps", "examples", "build", ".fingerprint"):
        root = os.path.join(profile, sub)
        if not os.path.isdir(root):
            continue
        for name in os.listdir(root):
            found = HASH.findall(name)
            if not found or found[-1] in keep:
                continue
            path = os.path.join(root, name)
            if os.path.isdir(path) and not os.path.islink(path):
                for dirpath, _, files in os.walk(path):
                    for fn in files:
                        try:
                            freed += os.lstat(os.path.join(dirpath, fn)).st_size
                        except OSError:
                            pass
                shutil.rmtree(path, ignore_errors=True)
            else:
                freed += os.lstat(path).st_size
                os.unlink(path)
            removed += 1
    print(
        f"prune-target: {units} units in use; removed {removed} stale entries "
        f"({freed / 1e9:.1f} GB) from {profile}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

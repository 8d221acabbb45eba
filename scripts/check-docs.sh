#!/usr/bin/env bash
# Checks the documents that lead a reader into the code (ARCHITECTURE.md, SPECIFICATION.md,
# README.md, docs/*.md): every repository path they name must exist, and no SPECIFICATION.md
# table row may be longer than 300 characters. scripts/test.sh runs it before the build; it
# needs bash and coreutils only (no cargo). Exit status 1 names every failure.
#
# What is taken as a path: the text of every `code span` and every markdown link target
# `[text](target)` outside fenced code blocks, when it holds no space and none of < > * | $ ~ …
# or "://" (placeholders, globs, commands, URLs), and does not start with "/" (a host path) or
# "../" in a code span (outside the repository). Of those, a code span is checked when
#   - it starts with a top-level entry of the repository and "/" (`crates/vm/src/spec.rs`,
#     `tests/tests/turn.rs`, `docs/ledger.md`), or
#   - under a heading that names directories in code spans (the codemap's
#     "### `crates/vm` (`reach-vm`)"), it starts with src/, tests/, benches/, migrations/,
#     examples/, images/ or schema/, or is a bare file name ending in .rs, .proto, .sql or .sh.
# Everything else in a code span (refusal codes such as `seal/retired-key`, names of runtime
# files such as `sources.toml`, Rust paths) is not a repository path and is not checked.
#
# How a path resolves (the first that exists wins):
#   - a link target: relative to the file that holds the link, as markdown does;
#   - a code span: relative to the repository root; then relative to each directory the
#     enclosing heading names (so `src/spec.rs` under "### `crates/vm`" is crates/vm/src/spec.rs),
#     and a bare file name anywhere below such a directory.
# Decorations: one `{a,b}` group is expanded, `#anchor` is dropped, and `file.rs::name` also
# requires `name` to occur in that file (a test or item name).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Files the task-pack crates (issue #27, docs/taskpacks.md) promise but have not committed yet.
# Only those two crates' future files belong here; remove each entry once its file lands.
allow=(
)

docs=(ARCHITECTURE.md SPECIFICATION.md README.md)
for f in docs/*.md; do docs+=("$f"); done

# Top-level entries: what the checkout holds, plus the directories a path may name even when
# they are missing (so a path into a removed directory is still caught).
declare -A top=([crates]=1 [services]=1 [tests]=1 [docs]=1 [scripts]=1 [manifest]=1 [proto]=1
  [cli]=1 [deploy]=1 [packs]=1)
for e in * .[!.]*; do
  if [ -e "$e" ] && [ "$e" != .git ]; then top[$e]=1; fi
done

failures=0
fail() { echo "check-docs: $1" >&2; failures=$((failures + 1)); }

allowed() {
  local a
  for a in "${allow[@]}"; do [ "$1" = "$a" ] && return 0; done
  return 1
}

# Prints one record per candidate: file, line, kind (code|link), text, heading spans.
extract() {
  awk -v file="$1" '
    function spans(s, sep,   out, t) {
      out = ""
      while (match(s, /`[^`]+`/)) {
        t = substr(s, RSTART + 1, RLENGTH - 2)
        out = out (out == "" ? "" : sep) t
        s = substr(s, RSTART + RLENGTH)
      }
      return out
    }
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced { next }
    /^#+ / { heading = spans($0, " ") }
    {
      s = $0
      while (match(s, /`[^`]+`/)) {
        printf "%s\t%d\tcode\t%s\t%s\n", file, NR, substr(s, RSTART + 1, RLENGTH - 2), heading
        s = substr(s, RSTART + RLENGTH)
      }
      s = $0
      while (match(s, /\]\([^)]+\)/)) {
        printf "%s\t%d\tlink\t%s\t%s\n", file, NR, substr(s, RSTART + 2, RLENGTH - 3), heading
        s = substr(s, RSTART + RLENGTH)
      }
    }
  ' "$1"
}

# Expands one {a,b} group.
expand() {
  local p=$1
  if [[ $p =~ ^([^{]*)\{([^}]*)\}(.*)$ ]]; then
    local pre=${BASH_REMATCH[1]} alts=${BASH_REMATCH[2]} post=${BASH_REMATCH[3]} a
    IFS=, read -ra parts <<<"$alts"
    for a in "${parts[@]}"; do echo "$pre$a$post"; done
  else
    echo "$p"
  fi
}

# Finds where path $1 (kind $2, named in file $3 under heading spans $4) is; prints it.
resolve() {
  local p=$1 kind=$2 file=$3 heading=$4 d found
  if [ "$kind" = link ]; then
    found=$(realpath -m "$(dirname "$file")/$p")
    [ -e "$found" ] && { echo "$found"; return 0; }
    return 1
  fi
  [ -e "$p" ] && { echo "$p"; return 0; }
  for d in $heading; do
    [ -d "$d" ] || continue
    [ -e "$d/$p" ] && { echo "$d/$p"; return 0; }
    if [[ $p != */* ]]; then
      found=$(find "$d" -name "$p" -not -path '*/target/*' -print -quit 2>/dev/null)
      [ -n "$found" ] && { echo "$found"; return 0; }
    fi
  done
  return 1
}

checked=0
for doc in "${docs[@]}"; do
  while IFS=$'\t' read -r file line kind text heading; do
    p=$text
    case $p in
      *[[:space:]]* | *'<'* | *'>'* | *'*'* | *'|'* | *'$'* | *'~'* | *…* | *://* | mailto:*) continue ;;
      /* | '#'*) continue ;;
    esac
    p=${p%%#*}
    name=
    if [[ $p == *::* ]]; then name=${p#*::}; name=${name%%[^A-Za-z0-9_]*}; p=${p%%::*}; fi
    [ -n "$p" ] || continue
    # The heading's directories: its code spans that are directories of the repository.
    dirs=
    for h in $heading; do
      h=${h%/}
      [[ $h == */* || -n ${top[$h]:-} ]] && [ -d "$h" ] && dirs+="$h "
    done
    if [ "$kind" = code ]; then
      [[ $p == ../* ]] && continue
      first=${p%%/*}
      if [[ $p == */* && -n ${top[$first]:-} ]]; then
        :
      elif [ -n "$dirs" ] && [[ $p == */* ]] && [[ $first =~ ^(src|tests|benches|migrations|examples|images|schema)$ ]]; then
        :
      elif [ -n "$dirs" ] && [[ $p != */* && $p =~ \.(rs|proto|sql|sh)$ ]]; then
        :
      else
        continue
      fi
    else
      # A link outside the repository (../shared/…) is not ours to check.
      target=$(realpath -m "$(dirname "$file")/$p")
      [[ $target == "$root"/* || $target == "$root" ]] || continue
    fi
    while read -r q; do
      checked=$((checked + 1))
      if [ "$kind" = link ]; then
        rel=$(realpath -m --relative-to="$root" "$(dirname "$file")/$q")
      else
        rel=$q
      fi
      if allowed "$rel"; then continue; fi
      if ! where=$(resolve "$q" "$kind" "$file" "$dirs"); then
        fail "$file:$line: \`$q\` does not exist"
        continue
      fi
      if [ -n "$name" ] && [ -f "$where" ] && ! grep -qF -- "$name" "$where"; then
        fail "$file:$line: \`$q::$name\`: $name does not occur in $where"
      fi
    done < <(expand "$p")
  done < <(extract "$doc")
done

# SPECIFICATION.md: one short row per target (characters, not bytes: UTF-8 continuation bytes
# are not counted).
rows=0
lineno=0
while IFS= read -r row; do
  lineno=$((lineno + 1))
  [[ $row == '|'* ]] || continue
  rows=$((rows + 1))
  n=$(printf '%s' "$row" | LC_ALL=C tr -d '\200-\277' | wc -c)
  if [ "$n" -gt 300 ]; then
    fail "SPECIFICATION.md:$lineno: table row of $n characters (at most 300)"
  fi
done <SPECIFICATION.md

if [ "$failures" -gt 0 ]; then
  echo "check-docs: $failures failure(s)" >&2
  exit 1
fi
echo "check-docs: ${#docs[@]} documents, $checked paths, $rows SPECIFICATION rows: ok"

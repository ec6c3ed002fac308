#!/usr/bin/env bash
# check_docs.sh SOURCE_DIR MINIPIPE: docs/deck.md lists every deck key `minipipe --help` knows, and
# every relative link in README.md and docs/*.md resolves to a file inside the repository.
set -u
src=$(cd "$1" && pwd) bin=$2
status=0
keys=$("$bin" --help | grep -oE '^  --[a-z0-9_]+\.[a-z0-9_]+' | sed 's/^  --//')
[ -n "$keys" ] || { echo "FAIL: no deck keys in --help"; exit 1; }
for k in $keys; do
  grep -qF "\`$k\`" "$src/docs/deck.md" || { echo "FAIL: deck key $k is not documented in docs/deck.md"; status=1; }
done
for md in "$src/README.md" "$src"/docs/*.md; do
  dir=$(dirname "$md")
  # Markdown links and images: ](target) with no scheme; drop any #anchor.
  while IFS= read -r target; do
    path=${target%%#*}
    [ -z "$path" ] && continue
    resolved=$(realpath -m "$dir/$path")
    case "$resolved" in
      "$src"/*) [ -e "$resolved" ] || { echo "FAIL: ${md#"$src"/} links to missing $path"; status=1; } ;;
      *) echo "FAIL: ${md#"$src"/} links outside the repository: $path"; status=1 ;;
    esac
  done < <(grep -oE '\]\([^)[:space:]]+\)' "$md" | sed -E 's/^\]\((.*)\)$/\1/' | grep -vE '^[a-z]+:')
done
[ $status -eq 0 ] && echo "PASS: $(echo "$keys" | wc -l) deck keys documented, every relative link resolves"
exit $status

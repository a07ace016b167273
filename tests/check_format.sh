#!/bin/sh
# The tracked C sources are clang-formatted (.clang-format); lists the files
# that differ. Fix with `make format`.
set -eu
cd "$(dirname "$0")/.."
bad=""
for f in $(git ls-files '*.c' '*.h'); do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
    echo "not clang-formatted (run make format):"; printf '  %s\n' $bad
    exit 1
fi
echo "ok: $(git ls-files '*.c' '*.h' | wc -l) files clang-formatted"

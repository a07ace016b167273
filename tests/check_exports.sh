#!/bin/sh
# liblmc.so and liblmc.a export the functions include/lmc.h declares
# (LMC_API) and nothing else: every defined global symbol starts with lmc_
# and is in the header, and every function of the header is exported. A
# program that uses only lmc.h then links against each of them.
# usage: check_exports.sh LIBLMC.so LIBLMC.a LMC.H CC
set -eu
so=$1 a=$2 header=$3 cc=$4
declared=$(grep -v '^#' "$header" | grep -o 'LMC_API [^(]*(' | sed 's/($//; s/.*[ *]//' | sort -u)
status=0

check() { # LABEL SYMBOLS
    label=$1 exported=$2
    bad=$(printf '%s\n' "$exported" | grep -v '^lmc_' || true)
    if [ -n "$bad" ]; then
        echo "$label: exported without the lmc_ prefix:"; printf '  %s\n' $bad; status=1
    fi
    extra=$(printf '%s\n' "$exported" | grep '^lmc_' | grep -vxF "$declared" || true)
    if [ -n "$extra" ]; then
        echo "$label: exported but not declared LMC_API in lmc.h:"; printf '  %s\n' $extra; status=1
    fi
    missing=$(printf '%s\n' "$declared" | grep -vxF "$exported" || true)
    if [ -n "$missing" ]; then
        echo "$label: declared in lmc.h but not exported:"; printf '  %s\n' $missing; status=1
    fi
    n=$(printf '%s\n' "$exported" | grep -c . || true)
    echo "$label: $n global symbols"
}

defined='$2 ~ /^[TWDBRVGSi]$/ {print $3}'
check "$so (nm -D)" "$(nm -D --defined-only "$so" | awk "$defined" | sort -u)"
check "$a (nm -g)" "$(nm -g --defined-only "$a" | awk "$defined" | sort -u)"

# an embedder's program, linked against each library
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/embed.c" <<'PROG'
#include <lmc.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    lmc_model *m = NULL;
    lmc_status st = lmc_model_load("/nonexistent/lmc-model", &m);
    if (st == LMC_OK || m != NULL || strlen(lmc_last_error()) == 0) return 1;
    lmc_set_num_threads(1);
    printf("%s: %s\n", lmc_status_string(st), lmc_last_error());
    return lmc_get_num_threads() == 1 ? 0 : 1;
}
PROG
inc=$(dirname "$header")
deps=$(pkg-config --libs jansson libpcre2-8 libutf8proc)
# built with OpenBLAS (the vision encoder's GEMMs): the archive needs it too
if nm "$a" 2>/dev/null | grep -q ' U cblas_sgemm$'; then deps="$deps $(pkg-config --libs openblas)"; fi
# LMC_EMBED_FLAGS: what a sanitizer build adds (its objects need the runtime)
"$cc" -std=c11 ${LMC_EMBED_FLAGS:-} -I"$inc" -o "$tmp/embed_static" "$tmp/embed.c" "$a" $deps -lpthread -lm \
    && "$tmp/embed_static" >/dev/null || { echo "a program using lmc.h does not link or run against $a"; status=1; }
"$cc" -std=c11 ${LMC_EMBED_FLAGS:-} -I"$inc" -o "$tmp/embed_shared" "$tmp/embed.c" "$so" -Wl,-rpath,"$(dirname "$so")" \
    && "$tmp/embed_shared" >/dev/null || { echo "a program using lmc.h does not link or run against $so"; status=1; }

[ $status = 0 ] && echo "ok: both libraries export only the lmc_ functions of lmc.h, and an embedder links against each"
exit $status

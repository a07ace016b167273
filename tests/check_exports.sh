#!/bin/sh
# liblmc.so exports the functions include/lmc.h declares (LMC_API) and
# nothing else: every defined dynamic symbol starts with lmc_ and is in the
# header, and every function of the header is exported.
# usage: check_exports.sh LIBLMC.so LMC.H
set -eu
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRrVv]$/ {print $3}' | sort -u)
declared=$(grep -v '^#' "$header" | grep -o 'LMC_API [^(]*(' | sed 's/($//; s/.*[ *]//' | sort -u)
status=0
bad=$(printf '%s\n' "$exported" | grep -v '^lmc_' || true)
if [ -n "$bad" ]; then
    echo "exported without the lmc_ prefix:"; printf '  %s\n' $bad; status=1
fi
extra=$(printf '%s\n' "$exported" | grep '^lmc_' | grep -vxF "$declared" || true)
if [ -n "$extra" ]; then
    echo "exported but not declared LMC_API in lmc.h:"; printf '  %s\n' $extra; status=1
fi
missing=$(printf '%s\n' "$declared" | grep -vxF "$exported" || true)
if [ -n "$missing" ]; then
    echo "declared in lmc.h but not exported:"; printf '  %s\n' $missing; status=1
fi
n=$(printf '%s\n' "$exported" | grep -c . || true)
[ $status = 0 ] && echo "ok: $n exported symbols, all lmc_ and all declared in lmc.h"
exit $status

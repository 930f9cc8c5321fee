#!/usr/bin/env bash
# Build Mooncake's transfer engine through the toolkit, cp312 of each variant, in the default
# local build images (podman), then verify each wheel. Nothing here is Mooncake-specific toolkit
# code: the matrix beside this script is all the toolkit is told.
#
#   examples/mooncake/build.sh MOONCAKE_CHECKOUT [VARIANT...]     (default variants: cpu cuda rocm)
#
# MOONCAKE_CHECKOUT: a checkout of github.com/kvcache-ai/Mooncake (docs/records/real-engines.md names the
# pinned commit) with extern/yalantinglibs filled in (pybind11 comes from PyPI as a build
# requirement). `release init` is run on it first (idempotent): it writes or refreshes the variant
# guard in python/mooncake/__init__.py, which verify's variant-conflict rule requires; the matrix it
# writes goes to a scratch file and is kept only for comparison (build/matrix.init.yaml).
# Wheels land in examples/mooncake/wheelhouse/<variant>/, logs in examples/mooncake/build/logs/.
# Exit status: that of the first step that failed (0 when every variant built and verified).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"

if [ $# -lt 1 ]; then
    echo "usage: $0 MOONCAKE_CHECKOUT [VARIANT...]" >&2
    exit 2
fi
checkout="$(cd "$1" 2>/dev/null && pwd)" || { echo "error: $1: not a directory" >&2; exit 2; }
shift
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(cpu cuda rocm)

if [ ! -f "$checkout/pyproject.toml" ] || [ ! -f "$checkout/mooncake-integration/CMakeLists.txt" ]; then
    echo "error: $checkout is not a Mooncake checkout (no pyproject.toml or mooncake-integration/)" >&2
    exit 2
fi
if [ ! -f "$checkout/extern/yalantinglibs/CMakeLists.txt" ]; then
    echo "error: $checkout/extern/yalantinglibs is empty: fill the submodule (git submodule update --init extern/yalantinglibs, or an archive of the commit it pins)" >&2
    exit 2
fi

mkdir -p "$here/build/logs"
ln -sfn "$checkout" "$here/mooncake"
cd "$root" || exit 1

echo "== release init on $checkout (variant guard)"
"$python" -m release init "$checkout" --variants cpu,cuda,rocm --force \
    --output "$here/build/matrix.init.yaml" >"$here/build/logs/init.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    cat "$here/build/logs/init.log" >&2
    exit $rc
fi
# init also writes noxfile.py, .release/ and .gitignore beside the matrix it was given.
rm -rf "$here/build/noxfile.py" "$here/build/.release" "$here/build/.gitignore"
"$python" -m release plan --matrix "$here/matrix.yaml" >"$here/build/logs/plan.log" 2>&1 || {
    rc=$?; cat "$here/build/logs/plan.log" >&2; exit $rc; }

status=0
summary=()
for variant in "${variants[@]}"; do
    log="$here/build/logs/build-$variant.log"
    echo "== build $variant (cp312), log: $log"
    start=$(date +%s)
    nice -n 10 "$python" -m release build --matrix "$here/matrix.yaml" --variant "$variant" --container \
        --python 3.12 >"$log" 2>&1
    rc=$?
    seconds=$(( $(date +%s) - start ))
    result="build rc=$rc"
    if [ $rc -eq 0 ]; then
        wheels=("$here"/wheelhouse/"$variant"/*cp312*.whl)
        "$python" -m release verify --matrix "$here/matrix.yaml" "${wheels[@]}" \
            >"$here/build/logs/verify-$variant.log" 2>&1
        rc=$?
        result="$result, verify rc=$rc"
        for wheel in "${wheels[@]}"; do
            result="$result, $(basename "$wheel") $(du -h "$wheel" | cut -f1)"
        done
    else
        grep -E "^error|CMake Error|error:" "$log" | head -5 | sed 's/^/    /'
    fi
    summary+=("$variant: ${seconds}s, $result")
    [ $status -ne 0 ] || status=$rc
done

echo "== summary (Mooncake $(git -C "$checkout" rev-parse --short HEAD 2>/dev/null || echo '?'))"
printf '  %s\n' "${summary[@]}"
exit $status

#!/bin/bash
# Issue 26 on the H200: serve the PEP 825 variant set of xfer-engine (null = CPU build, cu130 =
# CUDA 13 build, rocm72) from a plain local index on 127.0.0.1; uv 0.13.8 must pick cu130 by
# itself (no NV_VARIANT_PROVIDER_FORCE_* set); then the installed engine's device selftest.
#
# The exit status is that of what it ran: the first of uv's install, the look at what uv installed
# and the selftest to fail, else 0. The index server is stopped on every way out (the trap).
# VARIANTS_TMP (default /tmp) and VARIANTS_PORT (default 18999) move its files and its port.
set -u
C=$PWD/.hw-carry/variants
T=${VARIANTS_TMP:-/tmp}
PORT=${VARIANTS_PORT:-18999}
OUT=${OUT:-$T/variants-out}; mkdir -p "$OUT"
unset NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION NV_VARIANT_PROVIDER_FORCE_SM_ARCH
echo "=== host"; nvidia-smi -L; python3 --version; echo "driver (/sys/module/nvidia/version): $(cat /sys/module/nvidia/version 2>&1)"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$T/uvs" "$C"/uv-*.whl || exit 9
UV=$T/uvs/bin/uv; $UV --version
mkdir -p "$T/idx/xfer-engine" && cp "$C"/index/* "$T/idx/xfer-engine/" || exit 9
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$T/idx" >"$T/srv.log" 2>&1 &
SRV=$!
trap 'kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null' EXIT
sleep 2
echo "=== index http://127.0.0.1:$PORT/xfer-engine/"
python3 -c "import urllib.request,re,sys; print('\n'.join(re.findall(r'href=\"([^\"]+)\"', urllib.request.urlopen(sys.argv[1]).read().decode())))" \
  "http://127.0.0.1:$PORT/xfer-engine/"
echo "=== uv pip install --preview --target $T/xsite --python python3 --index-url http://127.0.0.1:$PORT/ xfer-engine"
rm -rf "$T/xsite"; UV_NO_CONFIG=1 $UV pip install -v --preview --no-cache --target "$T/xsite" --python python3 \
  --index-url "http://127.0.0.1:$PORT/" xfer-engine > "$T/uv.log" 2>&1
uv_rc=$?; echo "uv rc=$uv_rc"
grep -iE "variant|nvidia|Installed|\+ xfer|error" "$T/uv.log" | grep -v "^DEBUG Found fresh" | head -30
cp "$T/uv.log" "$OUT/uv-install.log"
if [ "$uv_rc" -ne 0 ]; then echo "uv failed (exit $uv_rc): $T/uv.log"; exit "$uv_rc"; fi
XSITE=$T/xsite python3 - <<'PY' || { rc=$?; echo "uv installed no readable xfer-engine (exit $rc)"; exit "$rc"; }
import glob, json, os
info = glob.glob(os.environ['XSITE'] + '/xfer_engine-*.dist-info')[0]
print('installed:', info.rsplit('/', 1)[-1], 'variant', list(json.load(open(info + '/variant.json'))['variants']))
print([l for l in open(info + '/METADATA') if l.startswith(('Name:', 'Requires-External:'))])
PY
ls "$T/xsite/bin"; export PATH=$T/xsite/bin:$PATH  # --target puts the console scripts (xfer-master) here
echo "=== PATH=$T/xsite/bin:\$PATH PYTHONPATH=$T/xsite python3 -m xfer selftest --device --json"
PYTHONPATH=$T/xsite python3 -m xfer selftest --device --json > "$OUT/selftest.json" 2> "$OUT/selftest.err"
selftest_rc=$?; echo "selftest rc=$selftest_rc"
cat "$OUT/selftest.json"; tail -5 "$OUT/selftest.err"
exit "$selftest_rc"

#!/bin/bash
# Issue 26 on the H200: serve the PEP 825 variant set of xfer-engine (null = CPU build, cu130 =
# CUDA 13 build, rocm72) from a plain local index on 127.0.0.1; uv 0.13.8 must pick cu130 by
# itself (no NV_VARIANT_PROVIDER_FORCE_* set); then the installed engine's device selftest.
set -u
C=$PWD/.hw-carry/variants
unset NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION NV_VARIANT_PROVIDER_FORCE_SM_ARCH
echo "=== host"; nvidia-smi -L; python3 --version; echo "driver (/sys/module/nvidia/version): $(cat /sys/module/nvidia/version 2>&1)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/uvs "$C"/uv-*.whl || exit 9
UV=/tmp/uvs/bin/uv; $UV --version
mkdir -p /tmp/idx/xfer-engine && cp "$C"/index/* /tmp/idx/xfer-engine/
python3 -m http.server 18999 --bind 127.0.0.1 --directory /tmp/idx >/tmp/srv.log 2>&1 &
SRV=$!
sleep 2
echo "=== index http://127.0.0.1:18999/xfer-engine/"
python3 -c "import urllib.request,re; print('\n'.join(re.findall(r'href=\"([^\"]+)\"', urllib.request.urlopen('http://127.0.0.1:18999/xfer-engine/').read().decode())))"
echo "=== uv pip install --preview --target /tmp/xsite --python python3 --index-url http://127.0.0.1:18999/ xfer-engine"
rm -rf /tmp/xsite; UV_NO_CONFIG=1 $UV pip install -v --preview --no-cache --target /tmp/xsite --python python3 \
  --index-url http://127.0.0.1:18999/ xfer-engine > /tmp/uv.log 2>&1; echo "uv rc=$?"
grep -iE "variant|nvidia|Installed|\+ xfer|error" /tmp/uv.log | grep -v "^DEBUG Found fresh" | head -30
cp /tmp/uv.log $OUT/uv-install.log
python3 - <<'PY'
import glob, json
info = glob.glob('/tmp/xsite/xfer_engine-*.dist-info')[0]
print('installed:', info.rsplit('/', 1)[-1], 'variant', list(json.load(open(info + '/variant.json'))['variants']))
print([l for l in open(info + '/METADATA') if l.startswith(('Name:', 'Requires-External:'))])
PY
ls /tmp/xsite/bin; export PATH=/tmp/xsite/bin:$PATH  # --target puts the console scripts (xfer-master) here
echo "=== PATH=/tmp/xsite/bin:\$PATH PYTHONPATH=/tmp/xsite python3 -m xfer selftest --device --json"
PYTHONPATH=/tmp/xsite python3 -m xfer selftest --device --json > $OUT/selftest.json 2> $OUT/selftest.err; echo "selftest rc=$?"
cat $OUT/selftest.json; tail -5 $OUT/selftest.err
kill $SRV

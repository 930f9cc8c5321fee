#!/usr/bin/env bash
# Install a CPython that neither uv nor pyenv can get here (their downloads come from github.com and
# python.org) from Debian unstable's binary packages, as a self-contained prefix that runs on an older
# Debian: `python3.X` as Debian sid builds it, with sid's own C library and loader beside it
# (patchelf points the interpreter at them), laid out as pyenv lays out a version so the toolkit
# finds it: $PYENV_ROOT/versions/3.X.Y/{bin/python3.X, lib/python3.X, include/python3.X}.
#
#   bash scripts/python-debian.sh 3.14     # `release toolchain install python 3.14` runs it last
#
# What changes from Debian's build, and why:
# - the interpreter's PT_INTERP and DT_RPATH, and lib-dynload's DT_RPATH, name sid's loader and
#   libraries in the prefix (sid's glibc is newer than the host's; DT_RPATH, unlike RUNPATH, also
#   serves what the modules load);
# - include/python3.X/pyconfig.h is the real one, not Debian's multiarch wrapper;
# - sysconfig names the prefix, not /usr, and the compilers gcc/g++, not x86_64-linux-gnu-g++;
# - pip installs into lib/python3.X/site-packages as upstream's does (sysconfig's scheme and a
#   sitecustomize: Debian's posix_local scheme and dist-packages are for a /usr Python);
# - ensurepip finds the pip wheel in ensurepip/_bundled and runs outside a venv too; that wheel's
#   certifi falls back to its own CA bundle where the system has none; EXTERNALLY-MANAGED is gone;
# - the standard library's bytecode is compiled (Debian's postinst would).
# Extensions are built by the host's compiler against the headers and load into it as into any
# CPython 3.X (the host's libstdc++ and others come through the loader's cache; sid's libc is newer).
#
# Environment: PYENV_ROOT (default ~/.pyenv), DEBIAN_MIRROR (the one mirror setting: default the Debian
# archive this system's apt sources name, else Debian's own; see _common.sh debian_mirror),
# PYTHON_DEBIAN_SUITE (default sid), PYTHON_DEBIAN_CACHE (default ~/.cache/release/python-debian).
# PYTHON_DEBIAN_MIRROR, DEBIAN_MIRROR's older name here, is still read (where DEBIAN_MIRROR is unset)
# for one release, then no longer.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

version="${1:-}"
[[ "$version" =~ ^3\.[0-9]+$ ]] || die "usage: python-debian.sh 3.X (a CPython minor version, e.g. 3.14)"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-${PYTHON_DEBIAN_MIRROR:-}}"  # the older name, for one release
mirror="$(debian_mirror)"
suite="${PYTHON_DEBIAN_SUITE:-sid}"
cache="${PYTHON_DEBIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/release/python-debian}"
versions="${PYENV_ROOT:-$HOME/.pyenv}/versions"
arch="$(dpkg --print-architecture 2>/dev/null)" || die "dpkg not found: this installer takes Debian's packages"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")"
command -v patchelf >/dev/null || die "patchelf not found: apt-get install patchelf"
py="python$version"

for done_dir in "$versions/$version".*; do
  if [ -x "$done_dir/bin/$py" ] && "$done_dir/bin/$py" -c 'import ssl, venv, ensurepip' 2>/dev/null; then
    log "CPython $version already at $done_dir/bin/$py"; exit 0
  fi
done

# A private apt root: sid's package lists and .debs, nothing of the host's dpkg state or sources.
root="$cache/apt-$suite-$arch"
mkdir -p "$root"/etc/apt/{apt.conf.d,preferences.d,sources.list.d} "$root"/var/lib/dpkg \
  "$root"/var/lib/apt/lists/partial "$root"/var/cache/apt/archives/partial
exec {lock}>"$root.lock"; flock "$lock"  # one run at a time uses the apt root (a second waits)
: >"$root/var/lib/dpkg/status"
echo "deb $mirror $suite main" >"$root/etc/apt/sources.list"
apt_opts=(-q -o "Dir=$root" -o "Dir::State::status=$root/var/lib/dpkg/status"
  -o Dir::Etc::trusted=/etc/apt/trusted.gpg -o Dir::Etc::trustedparts=/etc/apt/trusted.gpg.d
  -o Debug::NoLocking=1 -o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
  -o APT::Install-Recommends=0 -o APT::Sandbox::User=root)
log "Debian $suite's package lists ($mirror)"
apt-get "${apt_opts[@]}" update >"$root/update.log" 2>&1 \
  || die "apt-get update of Debian $suite from $mirror failed (log: $root/update.log)"
full="$(apt-cache "${apt_opts[@]}" show "$py-minimal" 2>/dev/null | sed -n 's/^Version: \([0-9.]*\).*/\1/p' | head -1 || true)"
[ -n "$full" ] || die "Debian $suite has no $py package ($mirror): no CPython $version to install from it"
prefix="$versions/$full"
log "CPython $full from Debian $suite's $py packages -> $prefix (with $suite's C library beside it)"
rm -f "$root"/var/cache/apt/archives/*.deb.tmp
apt-get "${apt_opts[@]}" install -y --download-only "$py" "$py-venv" "$py-dev" python3-pip-whl \
  >"$root/download.log" 2>&1 || die "downloading $py from Debian $suite failed (log: $root/download.log)"

# Unpack what the interpreter runs with; compilers' C library files and data packages stay out.
tmp="$(mktemp -d "$versions/.$full.XXXXXX" 2>/dev/null || { mkdir -p "$versions"; mktemp -d "$versions/.$full.XXXXXX"; })"
trap 'rm -rf "$tmp"' EXIT
skip=' libc6-dev linux-libc-dev libc-dev-bin libexpat1-dev zlib1g-dev tzdata ca-certificates debconf netbase readline-common openssl media-types libc-gconv-modules-extra openssl-provider-legacy '
for deb in "$root"/var/cache/apt/archives/*.deb; do
  name="$(dpkg-deb -f "$deb" Package)"
  case "$skip" in *" $name "*) continue ;; esac
  [ "$name" = python3-pip-whl ] || [ "$name" = python3-setuptools-whl ] || [[ "$name" != python3-* ]] || continue
  dpkg-deb -x "$deb" "$tmp/x" || die "unpacking $deb failed"
done
usr="$tmp/x/usr"; out="$tmp/out"
[ -x "$usr/bin/$py" ] || die "the $py package has no usr/bin/$py"
mkdir -p "$out/bin" "$out/include" "$out/lib"
cp -a "$usr/bin/$py" "$usr/bin/$py-config" "$out/bin/"
cp -a "$usr/lib/$py" "$usr/lib/$multiarch" "$out/lib/"
cp -a "$usr/include/$py" "$out/include/"
cp "$usr/include/$multiarch/$py/pyconfig.h" "$out/include/$py/pyconfig.h"
ln -s "$py" "$out/bin/python3"; ln -s "$py-config" "$out/bin/python3-config"
rm -f "$out/lib/$py/EXTERNALLY-MANAGED" "$out/lib/$multiarch"/*.a "$out/lib/$py"/config-*/*.a
rm -rf "$out/lib/$multiarch/gconv" "$out/lib/$multiarch/audit"
mkdir -p "$out/lib/$py/ensurepip/_bundled" "$out/lib/$py/site-packages"
cp "$usr"/share/python-wheels/pip-*.whl "$out/lib/$py/ensurepip/_bundled/" \
  || die "python3-pip-whl has no pip wheel in usr/share/python-wheels"

# Debian's pip reads /etc/ssl/certs/ca-certificates.crt only; a minimal root (a debootstrap minbase)
# has none: there it falls back to the certificates the wheel carries, as upstream's pip does.
python3 - "$out/lib/$py"/ensurepip/_bundled/pip-*.whl <<'PY' || die "adjusting the pip wheel's certifi failed"
import base64, hashlib, sys, zipfile
path, name = sys.argv[1], "pip/_vendor/certifi/core.py"
old = "def where() -> str:\n    return DEBIAN_CA_CERTS_PATH\n"
new = ("_bundled_where = where\n\n\ndef where() -> str:  # the system's certificates where there are any\n"
       "    import os\n    return DEBIAN_CA_CERTS_PATH if os.path.exists(DEBIAN_CA_CERTS_PATH) else _bundled_where()\n")
with zipfile.ZipFile(path) as zin:
    entries = [(info, zin.read(info)) for info in zin.infolist()]
files = dict((info.filename, data) for info, data in entries)
text = files[name].decode()
assert text.count(old) == 1, f"{name}: Debian's where() changed"
files[name] = text.replace(old, new).encode()
digest = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
record = next(n for n in files if n.endswith(".dist-info/RECORD"))
files[record] = "".join(
    f"{name},sha256={digest},{len(files[name])}\n" if line.startswith(name + ",") else line + "\n"
    for line in files[record].decode().splitlines()
).encode()
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
    for info, _ in entries:
        zout.writestr(info, files[info.filename])
PY

# sysconfig names the prefix (and no /usr/share/python-wheels), and the compilers by their plain
# names (scikit-build-core hands CC/CXX to CMake: a build image may have no triplet-named g++);
# pip uses upstream's scheme.
lib="$out/lib/$py"
for f in "$lib"/_sysconfigdata_*.py "$lib"/_sysconfig_vars_*.json; do
  [ -L "$f" ] || sed -i -e "s#\(: *[\"']\)/usr\([/\"']\)#\1$prefix\2#" \
    -e "s#\(WHEEL_PKG_DIR[\"']: *[\"']\)[^\"']*#\1#" -e "s#\b$multiarch-\(gcc\|g++\|cpp\)#\1#g" "$f"
done
# edit FILE BEFORE AFTER: one line of Debian's stdlib changed, or a clear error when it moved.
edit() {
  [ "$(grep -c -F -- "$2" "$1")" = 1 ] || die "$1: expected one line '$2' (Debian's layout patch changed)"
  local from to
  from="$(printf '%s' "$2" | sed 's/[][|.*^$\\]/\\&/g')"; to="$(printf '%s' "$3" | sed 's/[|&\\]/\\&/g')"
  sed -i "s|$from|$to|" "$1"
}
edit "$lib/sysconfig/__init__.py" "prefix_scheme = 'posix_local'" "prefix_scheme = 'posix_prefix'"
edit "$lib/ensurepip/__init__.py" 'if sys.prefix != getattr(sys, "base_prefix", sys.prefix):' \
  'if True:  # not the system Python: ensurepip works outside a venv too'
# site is a frozen module (an edit of site.py does nothing): sitecustomize adds site-packages.
rm -f "$lib/sitecustomize.py"  # Debian's is a link to /etc/python3.X/sitecustomize.py (apport)
cat >"$lib/sitecustomize.py" <<'PY'
"""Written by the toolkit's scripts/python-debian.sh: upstream CPython's site-packages outside a venv
(Debian's site module looks in dist-packages only)."""
import os, site, sys
if sys.prefix == sys.base_prefix:
    site.addsitedir(os.path.join(sys.prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages"))
PY

loader="$(cd "$out/lib/$multiarch" && ls ld-linux*.so.* 2>/dev/null | head -1)"
[ -n "$loader" ] || die "Debian $suite's libc6 has no ld-linux*.so.* in usr/lib/$multiarch"
patchelf --set-interpreter "$prefix/lib/$multiarch/$loader" --force-rpath \
  --set-rpath "$prefix/lib/$multiarch" "$out/bin/$py" || die "patchelf of $py failed"
# The modules too (as the interpreter serves them anyway): `ldd` of one, as an image maker's check
# runs it, then finds this C library, not the older one of the image or the host.
for so in "$lib"/lib-dynload/*.so; do
  patchelf --force-rpath --set-rpath "$prefix/lib/$multiarch" "$so" || die "patchelf of $so failed"
done

rm -rf "$prefix"; mv "$out" "$prefix"  # the loader's path is right only there
# The standard library's bytecode, as an installed CPython has it (Debian's postinst writes it; an
# image then starts its Python without compiling, and copies it with the library).
# Beside its sources, whatever the caller's environment asks (a pycache prefix would put it elsewhere).
env -u PYTHONPYCACHEPREFIX -u PYTHONDONTWRITEBYTECODE \
  "$prefix/bin/$py" -m compileall -q -x '/(test|idlelib|tkinter|turtledemo)/' "$prefix/lib/$py" >/dev/null \
  || die "compiling the standard library of $prefix failed"
tag="$("$prefix/bin/$py" -c 'import sys; print(sys.implementation.cache_tag)')"
[ -f "$prefix/lib/$py/venv/__pycache__/__main__.$tag.pyc" ] \
  || die "compiling the standard library of $prefix left venv/__main__.py without its bytecode"
"$prefix/bin/$py" -c 'import ssl, ctypes, sqlite3, bz2, lzma, zlib, venv, ensurepip, sysconfig, sys
assert sysconfig.get_paths()["include"].startswith(sys.prefix), sysconfig.get_paths()' \
  || die "CPython $full at $prefix does not import its standard modules (output above)"
log "CPython $full at $prefix/bin/$py (Debian $suite's build, its C library in $prefix/lib/$multiarch)"

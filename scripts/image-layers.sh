# The scripts make-image.sh's `layer` leaf runs in a container of the image under the layer, one
# function a kind of layer (sourced from /mnt/xfer-scripts, the scripts beside make-image.sh,
# read-only). Their content is an input of every image's label (release/machine/recipe.py).
# shellcheck shell=bash

layer_toolkit() {  # CMD BINDIR: as in the image's own making, the scripts under /tmp/xfer-toolkit
  export PATH="$2:$PATH"
  apt-get update -q; mkdir -p /tmp/xfer-toolkit; cp -a /mnt/xfer-scripts /tmp/xfer-toolkit/scripts
  cd /tmp/xfer-toolkit && eval "$1"; rm -rf /tmp/xfer-toolkit
}

layer_packages() {  # MIRROR SUITE (ARCHIVE 'PKG ...')...: apt -t ARCHIVE, the suite's C library pinned
  # shellcheck source=scripts/_common.sh
  . /mnt/xfer-scripts/_common.sh
  export DEBIAN_MIRROR="$1"; local suite="$2" wanted; shift 2
  while [ $# -gt 0 ]; do
    add_debian_archive "$1" "$suite" "the image packages from $1" "xfer-image-$1"
    read -r -a wanted <<<"$2"; apt-get install -y -q --no-install-recommends -t "$1" "${wanted[@]}"; shift 2
  done
}

layer_layout() {  # PREFIX VIA GLOBS: the runtime's libraries moved into PREFIX, the loader told (VIA)
  local prefix="$1" via="$2" globs g f moved=0
  IFS=, read -r -a globs <<<"$3"; mkdir -p "$prefix"
  for g in "${globs[@]}"; do
    for f in /usr/lib/x86_64-linux-gnu/$g; do
      if [ -e "$f" ] || [ -L "$f" ]; then mv "$f" "$prefix/"; moved=$((moved + 1)); fi
    done
  done
  [ "$moved" -gt 0 ] || { echo "no file matching $3 in /usr/lib/x86_64-linux-gnu: include the runtime package"; exit 3; }
  [ "$via" != ld.so.conf.d ] || echo "$prefix" >/etc/ld.so.conf.d/xfer-runtime.conf
  ldconfig
}

layer_unload() {  # GLOBS: the runtime's files off the loader's path (TheRock's layouts find their own)
  local globs g; IFS=, read -r -a globs <<<"$1"
  for g in "${globs[@]}"; do rm -f /usr/lib/x86_64-linux-gnu/$g; done
  ldconfig; ! ldconfig -p | grep -q "${globs[0]%%[.*]*}"
}

layer_therock_os() {  # PREFIX GLOBS LINKS: the staged runtime (RUNPATH $ORIGIN) in PREFIX, LINKS to it
  local f; layer_unload "$2"; mkdir -p "$1" && cp -P /stage/*.so.* "$1/"
  if [ -n "$3" ]; then mkdir -p "$3"; for f in "$1"/*; do ln -s "$f" "$3/"; done; fi
}

layer_therock_pip() {  # PREFIX GLOBS V: the stand-in SDK's wheels in a venv at PREFIX, CPython V sees it
  local py="/opt/python/cp${3/./}-cp${3/./}"
  layer_unload "$2"; "$py/bin/python" -m venv --without-pip "$1"
  "$py/bin/python" -m pip --python "$1/bin/python" install -q --no-index --no-deps /stage/wheels/*.whl
  cp /stage/sitecustomize.py "$py/lib/python$3/"
}

layer_drop() {  # V=DIR...: the base's interpreters this image does not have
  local d v
  for d in "$@"; do
    v="${d%%=*}"; rm -rf "/opt/python/cp${v/./}-cp${v/./}" "${d#*=}"; [ ! -e "${d#*=}" ]
  done
}

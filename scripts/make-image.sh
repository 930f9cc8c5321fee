#!/usr/bin/env bash
# Make a local container image from Debian packages (debootstrap + podman import), with CPython
# interpreters at /opt/python/cpXY-cpXY the way cibuildwheel expects them in a manylinux image.
# No registry is needed: only the Debian archive (and PyPI for pip/build/auditwheel).
#
#   bash scripts/make-image.sh --tag localhost/xfer-build-rocm:6.4 --suite sid \
#        --include libamdhip64-dev,libhsa-runtime-dev --pythons 3.10,3.11,3.12,3.13
#   bash scripts/make-image.sh --tag localhost/xfer-smoke-rocm-distro:6.4 --minbase-only \
#        --include libamdhip64-6 --pythons 3.12
#   bash scripts/make-image.sh --tag localhost/xfer-smoke-rocm-opt:6.4 --minbase-only \
#        --include libamdhip64-6 --pythons 3.12 --runtime-prefix /opt/rocm-6.4.3/lib --runtime-via ld.so.conf.d
#
# Options:
#   --tag NAME            image tag (required); use localhost/... so nothing tries a registry
#   --suite S             Debian suite (default sid)
#   --mirror URL          Debian mirror (default http://deb.debian.org/debian)
#   --include a,b         extra Debian packages; `pkg/ARCHIVE` takes pkg (and what it needs) from
#                         another archive (sid, experimental) with the base suite's C library and
#                         compiler runtime pinned, so the image's glibc stays the base suite's;
#                         when every package is pkg/ARCHIVE, they are one layer over the image of
#                         the same recipe without them (made or found by its label)
#   --pythons 3.10,3.11   CPython versions (the newest /root/.pyenv/versions/X.Y.* of each)
#   --env-python V|none   interpreter placed at /opt/python/cp39-cp39, which cibuildwheel uses to
#                         read the container's environment (default 3.9; build images only)
#   --minbase-only        no build toolchain, no build/auditwheel: a plain runtime image for smoke tests
#   --gcc N               build images: compile with GCC N (gcc-N and g++-N from the suite instead of
#                         its default g++; /usr/local/bin/{cc,c++,gcc,g++,cpp} point to them), e.g. 14
#                         to match the release image (manylinux_2_28); default: the suite's g++
#   --auditwheel SPEC     the auditwheel requirement (e.g. 'auditwheel>=6.4.0'); default: the toolkit's
#                         own, from the pyproject.toml beside this script (the toolkit passes it)
#   --runtime-prefix DIR  move the runtime libraries (--runtime-libs) from the distribution's
#                         library directory into DIR (a vendor layout such as /opt/rocm-6.4.3/lib)
#   --runtime-via M       how the loader finds DIR: ld.so.conf.d (an entry + ldconfig) or
#                         LD_LIBRARY_PATH (set in the image's environment); default ld.so.conf.d
#   --runtime-libs globs  default 'libamdhip64.so*,libhsa-runtime64.so*,libamd_comgr.so*,libhiprtc.so*'
#   --env K=V             extra image environment variable (repeatable)
#   --base-pythons LIST   with a layer (a runtime layout, pkg/ARCHIVE packages): the image it is
#                         over has these interpreters (a superset of --pythons; the layer removes
#                         the others), so images that differ in their interpreters share one
#                         (default: --pythons)
#   --toolkit-install CMD build images: run CMD (e.g. 'bash scripts/install-cuda.sh 13.0 --from-pypi')
#                         from a copy of the scripts beside this one, with the newest --pythons
#                         interpreter first on PATH, in a container of the image of the same recipe
#                         without it (made or found by its label): the install is one layer over it
#   --python-root DIR     where the interpreters come from (default /root/.pyenv/versions)
#   --python-dir V=DIR    the installation directory of CPython V (repeatable; the toolkit passes
#                         the interpreters it finds); others are looked up under --python-root
#   --workdir DIR         scratch space (default /var/tmp/xfer-images)
#   --force               rebuild even when an image with the same inputs exists
#   --refresh-base        redo debootstrap and the interpreters' trees even when a cached result
#                         (< 1 day) exists
#
# Interpreters: the host's pyenv builds are copied to the same absolute path inside the image
# (their RUNPATH is /root/.pyenv/versions/X.Y.Z/lib and libpython is shared), and
# /opt/python/cpXY-cpXY is a symlink to that directory. site-packages, test suites, tkinter and the
# static libpython are left out, and the shared libraries' debug sections. The standard library's
# bytecode stays (not its -O and -OO copies; 13 MB per interpreter), so a Python started in a
# container does not compile what it imports (a venv: 0.5 s of CPU, 0.08 s with it). pip is
# installed inside the image by the pip wheel ensurepip bundles. Each interpreter's tree with its
# pip is kept for a day in the workdir, so the next image takes it as it is. The shared libraries their extension modules need are installed
# from the suite (t64 names first, then the older names) and checked with ldd in every image.
#
# Cache: the image carries the label io.xfer.image.inputs = sha256 of this script, the options,
# the interpreters' versions and the host CA certificates; an image with that tag and label is
# kept as it is. The Debian archive moves on without changing the label: --force rebuilds.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"
script_path="$(readlink -f "$0")"
t_start=$(date +%s)
args=("$@")
step() { log "[$(( $(date +%s) - t_start ))s] $*"; }

tag="" suite=sid mirror=http://deb.debian.org/debian include="" pythons="" env_python=3.9
minbase_only=0 gcc_major="" runtime_prefix="" runtime_via=ld.so.conf.d force=0 refresh_base=0
runtime_libs='libamdhip64.so*,libhsa-runtime64.so*,libamd_comgr.so*,libhiprtc.so*'
python_root=/root/.pyenv/versions workdir=/var/tmp/xfer-images
extra_env=() auditwheel_req="" toolkit_install="" base_pythons=""
declare -A py_dir=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --suite) suite="$2"; shift 2 ;;
    --mirror) mirror="$2"; shift 2 ;;
    --include) include="$2"; shift 2 ;;
    --pythons) pythons="$2"; shift 2 ;;
    --env-python) env_python="$2"; shift 2 ;;
    --minbase-only) minbase_only=1; shift ;;
    --gcc) gcc_major="$2"; shift 2 ;;
    --auditwheel) auditwheel_req="$2"; shift 2 ;;
    --runtime-prefix) runtime_prefix="$2"; shift 2 ;;
    --runtime-via) runtime_via="$2"; shift 2 ;;
    --runtime-libs) runtime_libs="$2"; shift 2 ;;
    --env) extra_env+=("$2"); shift 2 ;;
    --base-pythons) base_pythons="$2"; shift 2 ;;
    --toolkit-install) toolkit_install="$2"; shift 2 ;;
    --python-root) python_root="$2"; shift 2 ;;
    --python-dir) [[ "$2" == *=/* ]] || die "--python-dir takes V=DIR (e.g. 3.12=/root/.pyenv/versions/3.12.1)"
                  py_dir[${2%%=*}]="${2#*=}"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --force) force=1; shift ;;
    --refresh-base) refresh_base=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -n "$tag" ] || die "--tag is required"
if [ "$minbase_only" -eq 0 ] && [ -z "$auditwheel_req" ]; then
  # The one place the bound is written: the toolkit's pyproject.toml ("auditwheel>=X" in dependencies).
  pyproject="$(dirname "$script_path")/../pyproject.toml"
  [ -f "$pyproject" ] && auditwheel_req="$(grep -oE '^[[:space:]]*"auditwheel[^"]*"' "$pyproject" | sed -n 1p | tr -d ' "')"
  [ -n "$auditwheel_req" ] || die "no auditwheel requirement: give --auditwheel SPEC (\`release\` passes the toolkit's own)"
fi
[[ -z "$auditwheel_req" || "$auditwheel_req" =~ ^auditwheel[\<\>=!~,.0-9]*$ ]] || die "--auditwheel '$auditwheel_req' is not an auditwheel requirement"
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot and rootful podman)"
for tool in podman debootstrap; do
  command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup-podman.sh first"
done
case "$runtime_via" in ld.so.conf.d|LD_LIBRARY_PATH) ;; *) die "--runtime-via must be ld.so.conf.d or LD_LIBRARY_PATH" ;; esac
[ -z "$runtime_prefix" ] || [ "${runtime_prefix#/}" != "$runtime_prefix" ] || die "--runtime-prefix must be absolute"
[ -z "$gcc_major" ] || [[ "$gcc_major" =~ ^[1-9][0-9]?$ ]] || die "--gcc '$gcc_major' is not a GCC major (e.g. 14)"
[ "$minbase_only" -eq 0 ] || [ -z "$gcc_major" ] || die "--gcc is for build images, not with --minbase-only"
[ "$minbase_only" -eq 0 ] || [ -z "$toolkit_install" ] || die "--toolkit-install is for build images, not with --minbase-only"
[ "$minbase_only" -eq 1 ] && env_python=none

# ---- resolve interpreters: X.Y -> --python-dir, else the newest X.Y.Z under python_root ----------
resolve_python() {  # X.Y -> directory
  local v="$1" d
  [[ "$v" =~ ^3\.[0-9]+$ ]] || die "bad Python version '$v' (want X.Y, e.g. 3.12)"
  if [ -n "${py_dir[$v]:-}" ]; then
    [ -x "${py_dir[$v]}/bin/python$v" ] || die "--python-dir $v=${py_dir[$v]}: no bin/python$v there"
    printf '%s' "${py_dir[$v]}"; return
  fi
  d="$(find "$python_root" -mindepth 1 -maxdepth 1 -type d -name "$v.*" 2>/dev/null \
        | grep -E "/$v\.[0-9]+$" | sort -V | tail -n 1)"
  [ -n "$d" ] && [ -x "$d/bin/python$v" ] || die "no CPython $v under $python_root (pyenv install $v)"
  printf '%s' "$d"
}
IFS=, read -r -a py_list <<<"$pythons"
all_py=("${py_list[@]}")
if [ "$env_python" != none ]; then
  case ",$pythons," in *",$env_python,"*) ;; *) all_py+=("$env_python") ;; esac
fi
for v in "${all_py[@]}"; do py_dir[$v]="$(resolve_python "$v")"; done
IFS=, read -r -a base_py <<<"${base_pythons:-$pythons}"
dropped=()  # the base's interpreters this image leaves out
for v in "${base_py[@]}"; do
  case ",$pythons," in *",$v,"*) ;; *) dropped+=("$v"); py_dir[$v]="$(resolve_python "$v")" ;; esac
done
for v in "${py_list[@]}"; do
  case ",${base_pythons:-$pythons}," in *",$v,"*) ;; *) die "--base-pythons '$base_pythons' lacks $v (of --pythons)" ;; esac
done
pkgs=(ca-certificates)
if [ "$minbase_only" -eq 0 ]; then
  # The suite's default g++, or exactly GCC N (no other g++ in the image to be picked by accident).
  if [ -n "$gcc_major" ]; then pkgs+=("gcc-$gcc_major" "g++-$gcc_major"); else pkgs+=(g++); fi
  pkgs+=(make cmake ninja-build patchelf git file binutils)
fi
declare -A by_archive=()
plain=0  # --include packages of the suite itself
if [ -n "$include" ]; then
  IFS=, read -r -a extra <<<"$include"
  for p in "${extra[@]}"; do
    case "$p" in
      */*) [[ "${p#*/}" =~ ^[a-z][a-z0-9-]*$ ]] || die "--include '$p': pkg/ARCHIVE names a Debian archive (sid, experimental)"
           by_archive[${p#*/}]+="${by_archive[${p#*/}]:+ }${p%%/*}" ;;
      *) pkgs+=("$p"); plain=$((plain + 1)) ;;
    esac
  done
fi
# Packages all from other archives (pkg/ARCHIVE: a runtime over the suite's own image) are a layer.
packages_layer=0
[ "${#by_archive[@]}" -eq 0 ] || [ "$plain" -gt 0 ] || packages_layer=1
[ "${#dropped[@]}" -eq 0 ] || [ -n "$runtime_prefix" ] || [ "${#extra_env[@]}" -gt 0 ] \
  || [ "$packages_layer" -eq 1 ] \
  || die "--base-pythons is for a layer over an image: a runtime layout (--runtime-prefix or --env) or packages from other archives (--include pkg/ARCHIVE only)"
[ "${#all_py[@]}" -gt 0 ] || log "no --pythons: the image gets no interpreter"

# ---- cache key -------------------------------------------------------------------------------
ca_files=(/usr/local/share/ca-certificates/*.crt)
[ -e "${ca_files[0]}" ] || ca_files=()
inputs_text="$( {
  cat "$script_path" "$(dirname "$script_path")/_common.sh" | sha256sum  # content, not the path: any checkout reuses the image
  printf 'suite=%s mirror=%s include=%s minbase=%s prefix=%s via=%s libs=%s env_python=%s\n' \
    "$suite" "$mirror" "$include" "$minbase_only" "$runtime_prefix" "$runtime_via" "$runtime_libs" "$env_python"
  printf 'env=%s\n' "${extra_env[@]:-}"
  [ "${#dropped[@]}" -eq 0 ] || printf 'base-pythons=%s\n' "$base_pythons"
  printf 'auditwheel=%s gcc=%s\n' "$auditwheel_req" "$gcc_major"
  if [ -n "$toolkit_install" ]; then  # the command and every script it may run
    printf 'toolkit-install=%s\n' "$toolkit_install"
    cat "$(dirname "$script_path")"/install-*.sh "$(dirname "$script_path")"/hipcc-host.sh "$(dirname "$script_path")"/runtimes.tsv | sha256sum
  fi
  for v in "${all_py[@]}"; do printf 'python %s %s\n' "$v" "${py_dir[$v]}"; done
  [ "${#ca_files[@]}" -eq 0 ] || sha256sum "${ca_files[@]}"
} )"
inputs="$(printf '%s\n' "$inputs_text" | sha256sum | cut -c1-64)"
label=io.xfer.image.inputs

# ---- the record of every call -------------------------------------------------------------------
# $record/calls.log: one tab-separated line a call (epoch seconds, tag, inputs, what it did:
# up-to-date, tagged, layer or made, seconds, who asked), and $record/inputs/<inputs>.txt: what went
# into that hash. When one tag is made twice, the two files' difference says why the second make
# did not find the first up to date (tests/ci_time.py prints it at the end of a test run).
record=/var/tmp/release-make-image
mkdir -p "$record/inputs"
[ -e "$record/inputs/$inputs.txt" ] || printf '%s\n' "$inputs_text" >"$record/inputs/$inputs.txt"
remember() {
  local by="${PYTEST_CURRENT_TEST:-$(tr '\0' ' ' <"/proc/$PPID/cmdline" 2>/dev/null | cut -c1-200)}"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%s)" "$tag" "$inputs" "$1" "$(( $(date +%s) - t_start ))" \
    "${by% (*)}" >>"$record/calls.log" 2>/dev/null || true
}

# ---- check in the image ---------------------------------------------------------------------------------
check_image() {  # every interpreter runs, the compilers are the asked GCC, a venv can be made
  if [ "${#all_py[@]}" -gt 0 ]; then  # one container for every interpreter's check
    probe=""
    for v in "${all_py[@]}"; do
      probe+="printf '%s ' cp${v/./}-cp${v/./}; /opt/python/cp${v/./}-cp${v/./}/bin/python -c 'import sys, ssl, venv; print(sys.version.split()[0])' || exit 1; "
    done
    out="$(podman run --rm --network=none "$tag" sh -c "$probe" 2>&1)" \
      || die "an interpreter under /opt/python does not run in $tag: $(echo $out | tail -c 300)"
    while read -r tagv version; do step "in $tag: /opt/python/$tagv/bin/python is $version"; done <<<"$out"
  fi
  if [ -n "$gcc_major" ]; then
    out="$(podman run --rm --network=none "$tag" sh -c 'for c in cc c++ gcc g++; do $c -dumpversion; done' 2>&1)" \
      || die "the compilers do not run in $tag: $out"
    [ "$(printf '%s\n' "$out" | cut -d. -f1 | sort -u)" = "$gcc_major" ] \
      || die "cc, c++, gcc, g++ in $tag report $(echo $out), not GCC $gcc_major"
    step "in $tag: $(podman run --rm --network=none "$tag" c++ --version | sed -n 1p)"
  fi
  if [ "${#py_list[@]}" -gt 0 ]; then
    v="${py_list[0]}"
    # The venv a smoke leg makes: no ensurepip, the interpreter's pip aimed at it (release/machine/venv.py)
    py="/opt/python/cp${v/./}-cp${v/./}/bin/python"
    podman run --rm "$tag" sh -c "$py -m venv --without-pip /tmp/v && $py -m pip --python /tmp/v/bin/python --version" \
      >/dev/null 2>&1 || die "a venv cannot be created and filled by pip --python with CPython $v in $tag"
    step "in $tag: python -m venv works, and its pip installs into one (--python)"
  fi
}

if [ "$force" -eq 0 ] && have="$(podman image inspect "$tag" --format "{{index .Labels \"$label\"}}" 2>/dev/null)" \
   && [ "$have" = "$inputs" ]; then
  log "$tag is up to date (inputs ${inputs:0:12}): nothing to do"
  remember up-to-date
  log "image size: $(podman image inspect "$tag" --format '{{.Size}}' | numfmt --to=iec)"
  exit 0
fi
old_id="$(podman image inspect "$tag" --format '{{.Id}}' 2>/dev/null || true)"
drop_old() {  # the image $tag named before, once nothing else names it
  local new_id; new_id="$(podman image inspect "$tag" --format '{{.Id}}')"
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then podman rmi "$old_id" >/dev/null 2>&1 || true; fi
}
with_inputs() {  # the newest image (any tag) whose label is $1; non-zero when podman cannot say
  # `podman images` fails now and then while another process removes an image (it reads each
  # image's labels; podman #24800): asked again, so that a passing failure is not taken for "none"
  # and the same recipe made a second time beside the first.
  # Its messages come with the IDs (2>&1): kept for the last failure's line, left out of an answer.
  local out try
  for try in 1 2 3 4 5; do
    if out="$(podman images --noheading --filter "label=$label=$1" --format '{{.Id}}' 2>&1)"; then
      printf '%s\n' "$out" | sed -n '/^[0-9a-f]\{64\}$/{p;q}'
      return 0
    fi
    [ "$try" -eq 5 ] || sleep "$try"
  done
  printf '%s\n' "$out" | tail -n 1 >&2
  return 1
}

# ---- the same recipe under another tag: that image is this one ----------------------------------
# One maker per recipe, whatever its tag (the caller's lock is per tag): two tags of one recipe
# asked for side by side are one image, the second a tag of the first. Held until this script ends.
exec {inputs_lock}>"$record/.inputs-${inputs:0:32}.lock"
flock "$inputs_lock"
same=""
if [ "$force" -eq 0 ]; then
  same="$(with_inputs "$inputs")" || die "podman images failed five times: cannot tell whether an image of these inputs exists (${inputs:0:12})"
fi
if [ -n "$same" ]; then
  podman tag "$same" "$tag" || die "podman tag $same $tag failed"
  drop_old
  remember tagged
  log "done: $tag  the image made from the same inputs (${same:0:12}), tagged  build $(( $(date +%s) - t_start ))s"
  exit 0
fi

layer_made() {  # CONTAINER: its commit is $tag now; the container goes, the image is checked
  podman rm -f "$1" >/dev/null 2>&1 || true
  drop_old
  check_image
  size="$(podman image inspect "$tag" --format '{{.Size}}')"
  remember layer
  log "done: $tag  image size $(numfmt --to=iec "$size") ($size bytes)  build $(( $(date +%s) - t_start ))s"
  exit 0
}

# ---- a runtime layout (smoke images): one layer over the image of the same recipe without it -----
# The layouts of one runtime (distribution, /opt prefix, LD_LIBRARY_PATH) differ only in where its
# libraries lie and how the loader finds them: the rest is made once, and each layout is a commit
# of the moves over it (seconds, where a whole image takes minutes).
if [ "$minbase_only" -eq 1 ] && { [ -n "$runtime_prefix" ] || [ "${#extra_env[@]}" -gt 0 ]; }; then
  base_args=() skip=0
  for a in "${args[@]}"; do  # this recipe without its layout, with the base's interpreters
    if [ "$skip" -eq 1 ]; then skip=0; continue; fi
    case "$a" in
      --tag|--runtime-prefix|--runtime-via|--runtime-libs|--env|--base-pythons|--pythons) skip=1 ;;
      --force) ;;  # --force remakes the layer; the base is the recipe's, made or found by its label
      *) base_args+=("$a") ;;
    esac
  done
  base_args+=(--pythons "${base_pythons:-$pythons}")
  base_tag="localhost/xfer-layout-base-$(printf '%s\n' "${base_args[@]}" | sha256sum | cut -c1-16)"
  # Found by its label in a second, or made (one maker of a recipe at a time: its lock).
  step "the image without the layout: $base_tag"
  bash "$script_path" "${base_args[@]}" --tag "$base_tag" 2>&1 | sed 's/^/  /' \
    || die "making the image without the layout ($base_tag) failed"
  base="$(podman image inspect "$base_tag" --format '{{.Id}}' 2>/dev/null)" \
    || die "no image $base_tag after making it"
  step "runtime libraries ($runtime_libs) -> ${runtime_prefix:-where they are}, found through $runtime_via${dropped[*]:+, without CPython ${dropped[*]}}: a layer over ${base:0:12}"
  move="set -e"
  for v in "${dropped[@]}"; do  # the base's interpreters this image does not have
    move+="; rm -rf '/opt/python/cp${v/./}-cp${v/./}' '${py_dir[$v]}'; [ ! -e '${py_dir[$v]}' ]"
  done
  changes=(--change "LABEL $label=$inputs" --change "CMD [\"/bin/bash\"]")  # not the moves' command
  if [ -n "$runtime_prefix" ]; then
    move+="; mkdir -p '$runtime_prefix'; moved=0"
    IFS=, read -r -a globs <<<"$runtime_libs"
    for g in "${globs[@]}"; do
      move+="; for f in /usr/lib/x86_64-linux-gnu/$g; do if [ -e \"\$f\" ] || [ -L \"\$f\" ]; then mv \"\$f\" '$runtime_prefix/'; moved=\$((moved + 1)); fi; done"
    done
    move+="; [ \"\$moved\" -gt 0 ] || { echo \"no file matching '$runtime_libs' in /usr/lib/x86_64-linux-gnu: include the runtime package (--include)\"; exit 3; }"
    if [ "$runtime_via" = ld.so.conf.d ]; then
      move+="; echo '$runtime_prefix' > /etc/ld.so.conf.d/xfer-runtime.conf"
    else
      changes+=(--change "ENV LD_LIBRARY_PATH=$runtime_prefix")
    fi
    move+="; ldconfig"
  fi
  for e in "${extra_env[@]}"; do changes+=(--change "ENV $e"); done
  ctr="xfer-layout-$$-$RANDOM"
  out="$(podman run --name "$ctr" --network=none "$base" /bin/sh -c "$move" 2>&1)" \
    || { podman rm -f "$ctr" >/dev/null 2>&1; die "the runtime layout over $base_tag failed: $(echo $out | tail -c 300)"; }
  podman commit --quiet "${changes[@]}" "$ctr" "$tag" >/dev/null \
    || { podman rm -f "$ctr" >/dev/null 2>&1; die "podman commit of the layout failed"; }
  layer_made "$ctr"
fi

# ---- layers: a toolkit install, packages from another archive ----------------------------------
# A build image's toolkit install (the cuda build image is the cpu one plus what install-cuda.sh
# adds) and a runtime from another archive (HIP 7.2 from experimental over trixie) are each one
# layer over the image of the same recipe without them: that image is made (or found by its label)
# once and shared (the cpu build image, clean-minbase), and the layer is the install's commit.
base_image() {  # WHAT KIND ARGS...: the image of ARGS (a recipe), made or found: sets $base
  local what="$1" kind="$2" base_tag; shift 2
  base_tag="localhost/xfer-$kind-base-$(printf '%s\n' "$@" | sha256sum | cut -c1-16)"
  step "the image without $what: $base_tag"
  bash "$script_path" "$@" --tag "$base_tag" 2>&1 | sed 's/^/  /' \
    || die "making the image without $what ($base_tag) failed"
  base="$(podman image inspect "$base_tag" --format '{{.Id}}' 2>/dev/null)" \
    || die "no image $base_tag after making it"
}
commit_layer() {  # WHAT LOG SCRIPT ARGS...: SCRIPT (bash) in a container of $base -> $tag, checked
  local what="$1" out="$2" run="$3" ctr="xfer-layer-$$-$RANDOM"; shift 3
  mkdir -p "$(dirname "$out")"
  step "$what (a layer over ${base:0:12})"
  podman run --name "$ctr" --network=host -v "$(dirname "$script_path"):/mnt/xfer-scripts:ro" \
    "$base" bash -c "set -e; export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
$run
cd / && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /root/.cache" \
    make-image.sh "$@" >"$out" 2>&1 \
    || { podman rm -f "$ctr" >/dev/null 2>&1
         die "$what failed in the image: $(grep -v '^ *$' "$out" | tail -n 1) (log: $out)"; }
  sed 's/^/    /' "$out" | tail -n 3
  # The base's environment stays as it is (the settings above were the install's own, not the image's).
  podman commit --quiet --change "LABEL $label=$inputs" --change "LABEL io.xfer.image.pythons=${pythons:-none}" \
    --change 'CMD ["/bin/bash"]' "$ctr" "$tag" >/dev/null \
    || { podman rm -f "$ctr" >/dev/null 2>&1; die "podman commit of the layer ($what) failed"; }
  layer_made "$ctr"
}
logs="$workdir/logs/${tag//[^A-Za-z0-9._-]/_}"  # this image's logs, a layer's or a whole image's

if [ -n "$toolkit_install" ]; then
  [ "${#py_list[@]}" -gt 0 ] || die "--toolkit-install needs --pythons (the install may use pip)"
  base_args=() skip=0
  for a in "${args[@]}"; do  # this recipe without its toolkit install
    if [ "$skip" -eq 1 ]; then skip=0; continue; fi
    case "$a" in --tag|--toolkit-install) skip=1 ;; --force) ;; *) base_args+=("$a") ;; esac
  done
  base_image "the toolkit" toolkit "${base_args[@]}"
  # As in the image's own making: apt's lists present, the scripts beside this one under
  # /tmp/xfer-toolkit, the newest interpreter first on PATH.
  # shellcheck disable=SC2016
  commit_layer "toolkit: $toolkit_install" "$logs/toolkit.log" 'export PATH="$2:$PATH"
apt-get update -q; mkdir -p /tmp/xfer-toolkit; cp -a /mnt/xfer-scripts /tmp/xfer-toolkit/scripts
cd /tmp/xfer-toolkit && eval "$1"; rm -rf /tmp/xfer-toolkit' "$toolkit_install" "${py_dir[${py_list[-1]}]}/bin"
fi

if [ "$packages_layer" -eq 1 ]; then
  base_args=() skip=0
  for a in "${args[@]}"; do  # this recipe without its packages, with the base's interpreters
    if [ "$skip" -eq 1 ]; then skip=0; continue; fi
    case "$a" in --tag|--include|--base-pythons|--pythons) skip=1 ;; --force) ;; *) base_args+=("$a") ;; esac
  done
  base_image "$include" packages "${base_args[@]}" --pythons "${base_pythons:-$pythons}"
  # add_debian_archive as the image's own making runs it (the C library and compiler runtime pinned
  # to the suite's), then the base's interpreters this image does not have are removed.
  # shellcheck disable=SC2016
  run='. /mnt/xfer-scripts/_common.sh; export DEBIAN_MIRROR="$1"; suite="$2"; shift 2
while [ $# -gt 0 ]; do
  add_debian_archive "$1" "$suite" "the image packages from $1" "xfer-image-$1"
  read -r -a wanted <<<"$2"; apt-get install -y -q --no-install-recommends -t "$1" "${wanted[@]}"; shift 2
done'
  for v in "${dropped[@]}"; do
    run+="; rm -rf '/opt/python/cp${v/./}-cp${v/./}' '${py_dir[$v]}'; [ ! -e '${py_dir[$v]}' ]"
  done
  layer_args=("$mirror" "$suite")
  for archive in "${!by_archive[@]}"; do layer_args+=("$archive" "${by_archive[$archive]}"); done
  commit_layer "Debian ${!by_archive[*]}: $include (apt -t; the C library stays $suite's)" \
    "$logs/apt.log" "$run" "${layer_args[@]}"
fi

# ---- debootstrap --------------------------------------------------------------------------------
# Scratch of its own: images of different tags are made side by side (the caller locks per tag);
# the logs stay, one directory per tag ($logs, above), for the message that names them.
mkdir -p "$workdir" "$logs"
root="$(mktemp -d "$workdir/rootfs.XXXXXX")"
mounted=()
cleanup() {
  local m
  for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

# The debootstrap result is kept as a tarball for a day (keyed on suite, mirror and packages), so
# images that share a package set (and reruns after a failure) skip the 1-2 minute debootstrap.
base_key="$(printf '%s %s %s\n' "$suite" "$mirror" "${pkgs[*]}" | sha256sum | cut -c1-16)"
base_tar="$workdir/base-$suite-$base_key.tar"
exec {base_lock}>"$base_tar.lock"
flock "$base_lock"  # one debootstrap per package set at a time: a second maker waits, then unpacks it
if [ "$refresh_base" -eq 0 ] && [ -f "$base_tar" ] && [ -n "$(find "$base_tar" -mmin -1440)" ]; then
  step "debootstrap result from $base_tar (less than a day old; --refresh-base to redo)"
  tar --numeric-owner -C "$root" -xf "$base_tar" || die "unpacking $base_tar failed"
else
  step "debootstrap --variant=minbase $suite (+ ${pkgs[*]})"
  debootstrap --variant=minbase --include="$(IFS=,; echo "${pkgs[*]}")" "$suite" "$root" "$mirror" \
    >"$logs/debootstrap.log" 2>&1 \
    || die "debootstrap failed: $(grep -E '^E:|^W: Failure' "$logs/debootstrap.log" | tail -n 1) (full log: $logs/debootstrap.log)"
  base_tmp="$(mktemp "$base_tar.tmp.XXXXXX")"
  tar --numeric-owner -C "$root" -cf "$base_tmp" . && mv "$base_tmp" "$base_tar" || rm -f "$base_tmp"
fi
exec {base_lock}>&-

for m in proc sys dev; do
  mount --bind "/$m" "$root/$m"; mounted=("$root/$m" "${mounted[@]}")
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
in_root() {  # a clean environment: no host PIP_* or proxy settings leak into the image
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# apt in the image: snapshot-like mirrors of sid carry expired Valid-Until dates.
printf 'Acquire::Check-Valid-Until "false";\nAPT::Install-Recommends "false";\n' \
  >"$root/etc/apt/apt.conf.d/90xfer-image"
if [ "${#ca_files[@]}" -gt 0 ]; then
  step "host CA certificates into the image (${#ca_files[@]} files)"
  cp "${ca_files[@]}" "$root/usr/local/share/ca-certificates/"
  in_root update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the image"
fi

# ---- packages from other archives (pkg/ARCHIVE) ----------------------------------------------------
if [ "${#by_archive[@]}" -gt 0 ]; then
  cp "$(dirname "$script_path")/_common.sh" "$root/tmp/xfer-common.sh"
  for archive in "${!by_archive[@]}"; do
    step "Debian $archive: ${by_archive[$archive]} (apt -t $archive; the C library stays $suite's)"
    # shellcheck disable=SC2016
    in_root DEBIAN_MIRROR="$mirror" bash -c '. /tmp/xfer-common.sh
      add_debian_archive "$1" "$2" "the image packages from $1" "xfer-image-$1" || exit 1
      read -r -a wanted <<<"$3"
      apt-get install -y -q --no-install-recommends -t "$1" "${wanted[@]}"' make-image.sh \
      "$archive" "$suite" "${by_archive[$archive]}" >>"$logs/apt.log" 2>&1 \
      || die "apt could not install ${by_archive[$archive]} from Debian $archive on $suite: $(grep -E '^E: ' "$logs/apt.log" | tail -n 1) (log: $logs/apt.log)"
  done
  rm -f "$root/tmp/xfer-common.sh"
fi
step "the image's C library: $(in_root dpkg-query -W -f '${Version}' libc6 2>/dev/null || echo unknown)"

# ---- interpreters ---------------------------------------------------------------------------------
if [ "${#all_py[@]}" -gt 0 ]; then
  step "apt: shared libraries the interpreters' extension modules need"
  in_root apt-get update -q >"$logs/apt.log" 2>&1 || die "apt-get update in the image failed (log: $logs/apt.log)"
  libs=()
  for alts in libssl3t64/libssl3 libffi8 libsqlite3-0 libbz2-1.0 liblzma5 libreadline8t64/libreadline8 \
              libncursesw6 libtinfo6 libuuid1 zlib1g libcrypt1 libnsl2 libtirpc3t64/libtirpc3 libgdbm6t64/libgdbm6; do
    pick=""
    for p in ${alts//\// }; do
      if in_root apt-cache show "$p" >/dev/null 2>&1; then pick="$p"; break; fi
    done
    [ -n "$pick" ] || die "none of '$alts' exists in $suite"
    libs+=("$pick")
  done
  in_root apt-get install -y -q "${libs[@]}" >>"$logs/apt.log" 2>&1 \
    || die "apt-get install ${libs[*]} failed (log: $logs/apt.log)"

  # A current pip: pip >= 24.2 verifies TLS with the system store (truststore) on 3.10+, so pip in
  # the image (and in build isolation) trusts the CA certificates copied in above; the pip that
  # ensurepip brings (23.x in 3.10/3.11) trusts only its own certifi bundle.
  pip_pkgs=(pip)
  [ "$minbase_only" -eq 1 ] || pip_pkgs+=(build)
  for v in "${all_py[@]}"; do
    d="${py_dir[$v]}"; tagv="cp${v/./}-cp${v/./}"
    mkdir -p "$root$d" "$root/opt/python"
    # The interpreter's tree as pip leaves it is kept for a day (keyed on the host interpreter and
    # what pip installs), like the debootstrap result: the images that share an interpreter skip
    # the install (about 5 s of CPU each). ldd and the imports below still
    # check it against each image's own libraries.
    py_key="$(printf '%s %s %s %s %s\n' "$v" "$d" "${pip_pkgs[*]}" stdlib-bytecode \
      "$(stat -c '%n %s %Y' "$d/bin/python$v" "$d"/lib/libpython*.so* 2>/dev/null | tr '\n' ' ')" | sha256sum | cut -c1-16)"
    py_tar="$workdir/python-$v-$py_key.tar"
    exec {py_lock}>"$py_tar.lock"
    flock "$py_lock"  # one maker of each interpreter's tree at a time; a second waits, then unpacks it
    if [ "$refresh_base" -eq 0 ] && [ -f "$py_tar" ] && [ -n "$(find "$py_tar" -mmin -1440)" ]; then
      step "CPython $(basename "$d") -> $d from $py_tar (pip in it; less than a day old), /opt/python/$tagv -> it"
      tar --numeric-owner -C "$root$d" -xf "$py_tar" || die "unpacking $py_tar failed"
      fresh=0
    else
      step "CPython $(basename "$d") -> $d (same path as on the host), /opt/python/$tagv -> it"
      # Everything but site-packages, the test suites, tkinter/IDLE, console scripts of host tools,
      # the -O/-OO bytecode and the static libpython (an extension links nothing of it; 60 MB per
      # interpreter). The shared libraries lose their debug sections (about 40 MB per interpreter),
      # not their symbols.
      members=()
      for m in ./include ./lib "./bin/python$v" "./bin/python$v-config"; do [ -e "$d/$m" ] && members+=("$m"); done
      tar -C "$d" -cf - \
        --exclude="./lib/python$v/site-packages/*" --exclude="./lib/python$v/test" \
        --exclude="./lib/python$v/idlelib" --exclude="./lib/python$v/tkinter" \
        --exclude="./lib/python$v/turtledemo" --exclude="./lib/python$v/lib-dynload/_tkinter*" \
        --exclude="./lib/python$v/config-*/libpython*.a" \
        --exclude='*.opt-1.pyc' --exclude='*.opt-2.pyc' "${members[@]}" | tar -C "$root$d" -xf - \
        || die "copying $d failed"
      find "$root$d/lib" -maxdepth 1 -name 'libpython*.so*' -type f -exec strip --strip-debug {} + \
        || die "strip --strip-debug of libpython in $d failed"
      find "$root$d/lib/python$v/lib-dynload" -name '*.so' -type f -exec strip --strip-debug {} + \
        || die "strip --strip-debug of $d/lib/python$v/lib-dynload failed"
      ln -sfn "python$v" "$root$d/bin/python3"; ln -sfn "python$v" "$root$d/bin/python"
      ln -sfn "python$v-config" "$root$d/bin/python3-config"
      fresh=1
    fi
    ln -sfn "$d" "$root/opt/python/$tagv"
    if [ "$v" = "$env_python" ] && [ "$tagv" != cp39-cp39 ]; then
      # cibuildwheel reads the container's environment with /opt/python/cp39-cp39/bin/python
      # (any Python 3 does that): the environment interpreter stands there when 3.9 is not at hand.
      ln -sfn "$d" "$root/opt/python/cp39-cp39"
    fi
    missing="$(in_root sh -c "for f in $d/bin/python$v $d/lib/libpython*.so.1.0 $d/lib/python$v/lib-dynload/*.so; do ldd \"\$f\"; done" | grep 'not found' | sort -u || true)"
    [ -z "$missing" ] || die "CPython $v in the image lacks shared libraries: $(echo $missing | tr '\n' ' ')"
    if [ "$fresh" -eq 1 ]; then
      # The pip wheel ensurepip bundles, run from the wheel itself (an importable zip), installs the
      # current pip (and build) once: ensurepip would install the bundled pip first, compiled, for pip
      # to replace it (about 4 s of CPU less per interpreter).
      bundled=("$root$d/lib/python$v/ensurepip/_bundled"/pip-*.whl)
      [ -f "${bundled[0]}" ] || die "CPython $v has no bundled pip wheel (lib/python$v/ensurepip/_bundled)"
      in_root "$d/bin/python$v" "${bundled[0]#"$root"}/pip" install -q --root-user-action=ignore "${pip_pkgs[@]}" \
        || die "pip install ${pip_pkgs[*]} (with the bundled pip) failed for CPython $v"
      [ -x "$root$d/bin/pip" ] || ln -sfn "pip$v" "$root$d/bin/pip"
      py_tmp="$(mktemp "$py_tar.tmp.XXXXXX")"
      tar --numeric-owner -C "$root$d" -cf "$py_tmp" . && mv "$py_tmp" "$py_tar" || rm -f "$py_tmp"
    fi
    exec {py_lock}>&-
    in_root "$d/bin/python$v" -c 'import ssl, ctypes, sqlite3, bz2, lzma, zlib, venv, ensurepip, pip' \
      || die "CPython $v does not import its standard modules (and pip) in the image"
  done
fi

if [ "$minbase_only" -eq 0 ] && [ "${#py_list[@]}" -gt 0 ]; then
  tool_py="${py_dir[${py_list[-1]}]}/bin/python${py_list[-1]}"
  step "auditwheel and uv in /opt/_internal/tools (venv of $(basename "$(dirname "$(dirname "$tool_py")")")), on PATH as /usr/local/bin/{auditwheel,uv}"
  in_root "$tool_py" -m venv /opt/_internal/tools
  # uv as manylinux images carry it: a build's before-build installs the toolkit with it.
  in_root /opt/_internal/tools/bin/pip install -q --disable-pip-version-check "$auditwheel_req" uv \
    || die "pip install '$auditwheel_req' uv failed"
  ln -sfn /opt/_internal/tools/bin/auditwheel "$root/usr/local/bin/auditwheel"
  ln -sfn /opt/_internal/tools/bin/uv "$root/usr/local/bin/uv"
fi

# The compiler first: the toolkit install may compile (install-cuda.sh makes the driver's link stub).
if [ -n "$gcc_major" ]; then
  step "GCC $gcc_major: /usr/local/bin/{cc,c++,gcc,g++,cpp} -> gcc-$gcc_major, g++-$gcc_major, cpp-$gcc_major"
  for pair in cc:gcc gcc:gcc c++:g++ g++:g++ cpp:cpp; do
    [ -x "$root/usr/bin/${pair#*:}-$gcc_major" ] || die "/usr/bin/${pair#*:}-$gcc_major is not in the image: does $suite carry gcc-$gcc_major?"
    ln -sfn "/usr/bin/${pair#*:}-$gcc_major" "$root/usr/local/bin/${pair%%:*}"
  done
fi


# ---- runtime layout (smoke images) -----------------------------------------------------------------
image_env=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "LANG=C.UTF-8")
# The image's CA bundle (ca-certificates, with the host's certificates added above) for every tool
# a build or smoke leg runs in it: OpenSSL-based tools, requests, pip and uv (rustls by default:
# UV_NATIVE_TLS makes it read the system store) trust the same certificates.
ca_bundle=/etc/ssl/certs/ca-certificates.crt
[ -s "$root$ca_bundle" ] || die "$ca_bundle is missing in the image (ca-certificates did not install)"
image_env+=("SSL_CERT_FILE=$ca_bundle" "SSL_CERT_DIR=/etc/ssl/certs" "REQUESTS_CA_BUNDLE=$ca_bundle"
            "CURL_CA_BUNDLE=$ca_bundle" "PIP_CERT=$ca_bundle" "UV_NATIVE_TLS=1")
if [ -n "$runtime_prefix" ]; then
  step "runtime libraries ($runtime_libs) -> $runtime_prefix, found through $runtime_via"
  mkdir -p "$root$runtime_prefix"
  moved=0
  IFS=, read -r -a globs <<<"$runtime_libs"
  for g in "${globs[@]}"; do
    for f in "$root"/usr/lib/x86_64-linux-gnu/$g; do
      [ -e "$f" ] || [ -L "$f" ] || continue
      mv "$f" "$root$runtime_prefix/"; moved=$((moved + 1))
    done
  done
  [ "$moved" -gt 0 ] || die "no file matching '$runtime_libs' in /usr/lib/x86_64-linux-gnu: include the runtime package (--include)"
  if [ "$runtime_via" = ld.so.conf.d ]; then
    echo "$runtime_prefix" >"$root/etc/ld.so.conf.d/xfer-runtime.conf"
  else
    image_env+=("LD_LIBRARY_PATH=$runtime_prefix")
  fi
  in_root ldconfig
fi
image_env+=("${extra_env[@]}")

# ---- slim and import ----------------------------------------------------------------------------------
step "cleaning apt lists and caches"
for m in "${mounted[@]}"; do umount -l "$m"; done; mounted=()
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/root/.cache "$root"/tmp/* "$root"/var/log/*.log
: >"$root/etc/resolv.conf"

step "podman import -> $tag"
changes=(--change "LABEL $label=$inputs" --change "LABEL io.xfer.image.suite=$suite"
         --change "LABEL io.xfer.image.pythons=${pythons:-none}" --change "CMD [\"/bin/bash\"]")
for e in "${image_env[@]}"; do changes+=(--change "ENV $e"); done
# Streamed: no tarball of the whole tree is written to disk first.
tar --numeric-owner --xattrs -C "$root" -cf - . | podman import "${changes[@]}" - "$tag" >/dev/null \
  || die "podman import failed"
drop_old

check_image

remember made
size="$(podman image inspect "$tag" --format '{{.Size}}')"
log "done: $tag  image size $(numfmt --to=iec "$size") ($size bytes)  build $(( $(date +%s) - t_start ))s"

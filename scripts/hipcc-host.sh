#!/usr/bin/env bash
# hipcc for host-only code: HIP's compiler driver name in front of the image's own C++ compiler.
#
# install-rocm.sh puts this at PREFIX/bin/hipcc (/usr/bin/hipcc for Debian's HIP) where no real
# hipcc can be installed: Debian's hipcc 7.2 (experimental) needs GCC 16's C++ runtime from sid,
# and a build image keeps its base suite's C library and C++ runtime (docs/records/rocm-hipcc.md says what
# else was tried). Real projects call `hipcc` by name for host files that only call the HIP runtime
# API (Mooncake's nvlink allocator): HIP's headers support that with a host compiler.
#
# What it does: runs ${HIPCC_HOST_CXX:-c++} with -D__HIP_PLATFORM_AMD__=1, HIP's include and
# library directories (when HIP is not under /usr) and, when the command links, -lamdhip64 after
# the inputs; `-x hip` and .hip/.cu sources compile as C++; $HIPCC_COMPILE_FLAGS_APPEND and
# $HIPCC_LINK_FLAGS_APPEND are honoured as hipcc honours them; `--version` prints "HIP version: X".
# What it refuses, in one line and exit status 2: device code, i.e. --offload-arch, -fgpu-rdc,
# --cuda-device-only / --offload-device-only / --genco, or a source that defines or launches a
# kernel (__global__, <<<...>>>, hipLaunchKernelGGL). Kernels hidden in headers are not seen: HIP's
# headers turn __global__ into nothing for a host compiler, so such a kernel would build as a host
# function that no launch reaches.
set -euo pipefail

me="hipcc (host-only)"
refuse() {
  printf '%s: error: %s: this hipcc compiles host code only (the image has no HIP device compiler); build device code in an image with ROCm'"'"'s clang (build_image.local: AMD'"'"'s ROCm development image)\n' "$me" "$1" >&2
  exit 2
}

# HIP's installation: HIP_PATH, ROCM_PATH, the prefix this script is installed in, /opt/rocm, /usr.
self="$(readlink -f "${BASH_SOURCE[0]}")"
hip_path=""
for p in "${HIP_PATH:-}" "${ROCM_PATH:-}" "$(dirname "$(dirname "$self")")" /opt/rocm /usr; do
  if [ -n "$p" ] && [ -f "$p/include/hip/hip_runtime_api.h" ]; then hip_path="$p"; break; fi
done
[ -n "$hip_path" ] || { printf '%s: error: no HIP headers (include/hip/hip_runtime_api.h) under HIP_PATH, ROCM_PATH, /opt/rocm or /usr\n' "$me" >&2; exit 2; }

# The host compiler: HIPCC_HOST_CXX, else the first c++ on PATH that is not this script.
cxx="${HIPCC_HOST_CXX:-}"
if [ -z "$cxx" ]; then
  IFS=: read -r -a path_dirs <<<"${PATH:-/usr/bin}"
  for d in "${path_dirs[@]}"; do
    if [ -x "$d/c++" ] && [ "$(readlink -f "$d/c++")" != "$self" ]; then cxx="$d/c++"; break; fi
  done
fi
[ -n "$cxx" ] || { printf '%s: error: no host C++ compiler: no c++ on PATH (set HIPCC_HOST_CXX)\n' "$me" >&2; exit 2; }

hip_version() {
  local h="$hip_path/include/hip/hip_version.h" parts=() d n
  for d in HIP_VERSION_MAJOR HIP_VERSION_MINOR HIP_VERSION_PATCH; do
    n="$(sed -nE "s/^#define[[:space:]]+$d[[:space:]]+([0-9]+).*/\1/p" "$h" 2>/dev/null | sed -n 1p)"
    parts+=("${n:-0}")
  done
  (IFS=.; printf '%s' "${parts[*]}")
}

# has_kernel FILE: the source, comments stripped by the preprocessor (no includes followed, no
# macros expanded), defines or launches a kernel.
has_kernel() {
  "$cxx" -x c++ -fpreprocessed -dD -E -P "$1" 2>/dev/null \
    | grep -qE '(^|[^A-Za-z0-9_])(__global__|hipLaunchKernelGGL)([^A-Za-z0-9_]|$)|<<<.*>>>'
}

args=() link=1 inputs=0 lang="" next_is=""
for a in "$@"; do
  if [ -n "$next_is" ]; then
    case "$next_is" in
      drop) ;;
      x) lang="$a"; if [ "$a" = hip ] || [ "$a" = cu ] || [ "$a" = cuda ]; then args+=(-x c++); else args+=(-x "$a"); fi ;;
      keep) args+=("$a") ;;
    esac
    next_is=""; continue
  fi
  case "$a" in
    --version)
      printf 'HIP version: %s\n' "$(hip_version)"
      printf '%s: host code only, compiled by %s (%s)\n' "$me" "$cxx" "$("$cxx" --version | sed -n 1p)"
      printf 'HIP path: %s\n' "$hip_path"
      exit 0 ;;
    --offload-arch=*|--amdgpu-target=*|--cuda-gpu-arch=*) refuse "$a asks for device code" ;;
    --offload-arch|--amdgpu-target|--cuda-gpu-arch) refuse "$a asks for device code" ;;
    -fgpu-rdc|--cuda-device-only|--offload-device-only|--genco|-fgpu-sanitize) refuse "$a asks for device code" ;;
    # clang's HIP options that mean nothing without device code
    -fno-gpu-rdc|--hip-link|-fhip-new-launch-api|-munsafe-fp-atomics|--cuda-host-only|--offload-host-only) ;;
    --rocm-path=*|--hip-path=*|--hip-device-lib-path=*|-parallel-jobs=*) ;;
    -x) next_is=x ;;
    -xhip|-xcu|-xcuda) lang=hip; args+=(-x c++) ;;
    -c|-S|-E|-M|-MM) link=0; args+=("$a") ;;
    -o|-I|-L|-l|-D|-U|-include|-isystem|-idirafter|-iquote|-MF|-MT|-MQ|-Xlinker|-Xassembler|-Xpreprocessor|-imacros)
      args+=("$a"); next_is=keep ;;
    -*) args+=("$a") ;;
    *)
      case "$a" in
        *.hip|*.cu|*.cpp|*.cc|*.cxx|*.c++|*.C|*.c)
          [ ! -f "$a" ] || ! has_kernel "$a" || refuse "$a defines or launches a kernel (__global__, <<<>>>, hipLaunchKernelGGL)"
          inputs=$((inputs + 1))
          case "$a" in
            *.hip|*.cu) [ -n "$lang" ] && args+=("$a") || args+=(-x c++ "$a" -x none) ;;
            *) args+=("$a") ;;
          esac ;;
        *) inputs=$((inputs + 1)); args+=("$a") ;;
      esac ;;
  esac
done

cmd=("$cxx" -D__HIP_PLATFORM_AMD__=1)
if [ "$hip_path" != /usr ]; then cmd+=(-isystem "$hip_path/include"); fi
read -r -a extra <<<"${HIPCC_COMPILE_FLAGS_APPEND:-}"
cmd+=("${args[@]}" "${extra[@]}")
if [ "$link" -eq 1 ] && [ "$inputs" -gt 0 ]; then
  [ "$hip_path" = /usr ] || cmd+=(-L"$hip_path/lib")
  read -r -a extra <<<"${HIPCC_LINK_FLAGS_APPEND:-}"
  cmd+=("${extra[@]}" -lamdhip64)
fi
[ -z "${HIPCC_VERBOSE:-}" ] || printf '%s: %s\n' "$me" "${cmd[*]}" >&2
exec "${cmd[@]}"

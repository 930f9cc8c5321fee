"""What the stand-in distribution holds (TheRock generates this file per build)."""

__version__ = "10.0.0"
PY_PACKAGE_SUFFIX_NONCE = "_10_0_0"

# shortname: (the dist package that holds it, its file glob under lib/)
LIBRARIES = {
    "amdhip64": ("rocm-sdk-core", "libamdhip64.so*"),
    "hsa-runtime64": ("rocm-sdk-core", "libhsa-runtime64.so*"),
    "amd_comgr": ("rocm-sdk-core", "libamd_comgr.so*"),
    "amd_smi": ("rocm-sdk-core", "libamd_smi.so*"),
}

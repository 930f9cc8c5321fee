// TEST STAND-IN: host code only, compiled by `hipcc` (no kernels): the HIP runtime API's calls.
#include <hip/hip_runtime.h>

extern "C" int hipcc_host_device_count(int *count) {
    *count = 0;
    return static_cast<int>(hipGetDeviceCount(count));
}

extern "C" int hipcc_host_alloc_probe(void) {
    void *p = nullptr;
    hipError_t err = hipMalloc(&p, 64);
    if (err == hipSuccess) {
        (void)hipFree(p);
    }
    return static_cast<int>(err);
}

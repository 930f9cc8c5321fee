# The backend switches, as Mooncake keeps them in mooncake-common/common.cmake.
option(USE_CUDA "Build the CUDA transport" OFF)
option(USE_HIP "Build the HIP transport" OFF)
option(BUILD_EXAMPLES "Build the examples" OFF)

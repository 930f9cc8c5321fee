"""Stand-in of torch for ROCm 7.14+ in AMD's vLLM image: at import it preloads the HIP runtime
through `rocm_sdk` with rtld_global=False, as that image does, before anything else loads it."""

import rocm_sdk

rocm_sdk.initialize_process(preload_shortnames=["amdhip64"], rtld_global=False)
__version__ = "2.13.0+standin"

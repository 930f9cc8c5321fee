/* TEST STAND-IN extension: calls the CUDA driver API (libcuda.so.1, from the NVIDIA driver) and
 * the runtime API (libcudart), as a real transfer engine does to classify a buffer's memory. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

/* versions() -> (driver API version or -error, runtime version or -error) */
static PyObject *versions(PyObject *self, PyObject *args) {
    int driver = 0, runtime = 0;
    CUresult d = cuDriverGetVersion(&driver);
    cudaError_t r = cudaRuntimeGetVersion(&runtime);
    (void)self;
    (void)args;
    return Py_BuildValue("(ii)", d == CUDA_SUCCESS ? driver : -(int)d, r == cudaSuccess ? runtime : -(int)r);
}

/* memory_type(address) -> CU_POINTER_ATTRIBUTE_MEMORY_TYPE of the address, or -error */
static PyObject *memory_type(PyObject *self, PyObject *arg) {
    unsigned long long address = PyLong_AsUnsignedLongLong(arg);
    unsigned int type = 0;
    CUresult rc;
    (void)self;
    if (PyErr_Occurred()) {
        return NULL;
    }
    rc = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)address);
    return PyLong_FromLong(rc == CUDA_SUCCESS ? (long)type : -(long)rc);
}

static PyMethodDef methods[] = {
    {"versions", versions, METH_NOARGS, "(CUDA driver version, CUDA runtime version)"},
    {"memory_type", memory_type, METH_O, "The driver's memory type of an address"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_driver", NULL, -1, methods};

PyMODINIT_FUNC PyInit__driver(void) { return PyModule_Create(&module); }

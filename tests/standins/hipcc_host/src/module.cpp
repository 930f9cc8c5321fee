// TEST STAND-IN: the extension module; the HIP calls live in devices.cpp (compiled by hipcc).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern "C" int hipcc_host_device_count(int *count);
extern "C" int hipcc_host_alloc_probe(void);

static PyObject *device_count(PyObject *, PyObject *) {
    int count = 0;
    int err = hipcc_host_device_count(&count);
    return Py_BuildValue("(ii)", err, count);
}

static PyObject *alloc_probe(PyObject *, PyObject *) {
    return PyLong_FromLong(hipcc_host_alloc_probe());
}

static PyMethodDef methods[] = {
    {"device_count", device_count, METH_NOARGS, "(hipError_t, count) of hipGetDeviceCount."},
    {"alloc_probe", alloc_probe, METH_NOARGS, "hipError_t of a 64-byte hipMalloc (freed)."},
    {nullptr, nullptr, 0, nullptr},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }

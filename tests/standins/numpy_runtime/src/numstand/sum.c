/* TEST STAND-IN: reads a numpy array through the buffer protocol (no numpy headers at build time). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *total(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    const double *values = (const double *)view.buf;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(double);
    double sum = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) sum += values[i];
    PyBuffer_Release(&view);
    return PyFloat_FromDouble(sum);
}

static PyMethodDef methods[] = {
    {"total", total, METH_VARARGS, "The sum of a contiguous float64 buffer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sum", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sum(void) { return PyModule_Create(&module); }

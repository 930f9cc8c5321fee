/* TEST STAND-IN: an extension that links zlib, found through pkg-config. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <zlib.h>

static PyObject *crc(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    unsigned long value = crc32(0L, (const Bytef *)data.buf, (uInt)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(value);
}

static PyObject *version(PyObject *self, PyObject *noargs) { return PyUnicode_FromString(zlibVersion()); }

static PyMethodDef methods[] = {
    {"crc32", crc, METH_VARARGS, "zlib's crc32 of a bytes-like object."},
    {"zlib_version", version, METH_NOARGS, "The zlib the extension loaded."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_crc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__crc(void) { return PyModule_Create(&module); }

/* TEST STAND-IN: the binding, over the engine's own shared library. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

const char* transfer_transport(void);
unsigned long transfer_checksum(const unsigned char* data, unsigned int size);

static PyObject* checksum(PyObject* self, PyObject* args) {
  const char* data;
  Py_ssize_t size;
  if (!PyArg_ParseTuple(args, "y#", &data, &size)) return NULL;
  return PyLong_FromUnsignedLong(transfer_checksum((const unsigned char*)data, (unsigned int)size));
}

static PyObject* transport(PyObject* self, PyObject* args) { return PyUnicode_FromString(transfer_transport()); }

static PyMethodDef methods[] = {
    {"checksum", checksum, METH_VARARGS, "CRC-32 of bytes, by the engine's library"},
    {"transport", transport, METH_NOARGS, "the transport the engine was built with"},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_engine", NULL, -1, methods};
PyMODINIT_FUNC PyInit__engine(void) { return PyModule_Create(&module); }

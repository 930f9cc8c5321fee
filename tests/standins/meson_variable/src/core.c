/* TEST STAND-IN: the extension, linking the pre-placed subproject's static library. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "adder.h"

static PyObject* add(PyObject* self, PyObject* args) {
  long a, b;
  if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
  return PyLong_FromLong(adder_add(a, b));
}

static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b, by the subproject"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods};
PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }

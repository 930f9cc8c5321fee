/* TEST STAND-IN: the binding, compiled against each Python's headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

uint64_t core_checksum(const char* data, uint64_t size);
uint64_t core_table(unsigned index);
uint64_t core_words(const char* text);

static PyObject* checksum(PyObject* self, PyObject* args) {
  const char* data;
  Py_ssize_t size;
  if (!PyArg_ParseTuple(args, "s#", &data, &size)) return NULL;
  return PyLong_FromUnsignedLongLong(core_checksum(data, (uint64_t)size) ^ core_table((unsigned)size));
}

static PyObject* words(PyObject* self, PyObject* args) {
  const char* text;
  if (!PyArg_ParseTuple(args, "s", &text)) return NULL;
  return PyLong_FromUnsignedLongLong(core_words(text));
}

static PyMethodDef methods[] = {
    {"checksum", checksum, METH_VARARGS, "FNV-1a of a string, mixed with a table entry"},
    {"words", words, METH_VARARGS, "the number of words in a string"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }

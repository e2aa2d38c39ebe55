// crashext: a C extension a Python program calls (Tests/Fixtures/python/loader.py), which writes
// through the pointer it is given: the program's own native code, called from its Python.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

__attribute__((noinline)) static void ext_store_record(long address, long value) {
    *(volatile long *)address = value;  // line 7: the fault
}

static PyObject *write_record(PyObject *self, PyObject *args) {
    long address;
    if (!PyArg_ParseTuple(args, "l", &address)) return NULL;
    ext_store_record(address, 42);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"write_record", write_record, METH_VARARGS, "Writes 42 at an address."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "crashext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_crashext(void) { return PyModule_Create(&module); }

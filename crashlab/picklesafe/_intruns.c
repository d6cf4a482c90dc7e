/* Decode a run of pickle integer opcodes into uint16s or int32s at C speed.
 *
 * Why: token ids are nine tenths of an SGLang crash dump's bytes (BININT1/BININT2/BININT, one
 * opcode per token), and the Python interpreter in unpickler.py costs about a microsecond per
 * opcode. This helper only reads bytes: it never allocates more than the run it has already
 * measured, never follows a length the file declares except a FRAME's (checked against the bytes
 * left), and builds no Python object but the result. Anything else stops the run; the Python
 * interpreter then reads (and judges) that opcode.
 *
 * run(buffer, start) -> (raw, end, wide): the integers of the run at ``start`` as native bytes,
 *     the offset where it stops (the first opcode that is not BININT1/BININT2/BININT/FRAME), and
 *     whether they are int32s (wide: a BININT outside 0..65535) or uint16s (every id of a
 *     vocabulary below 65,536: half the memory, less than the 3 bytes a token takes in the file).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define OP_BININT 'J'
#define OP_BININT1 'K'
#define OP_BININT2 'M'
#define OP_FRAME 0x95

/* Walks the run from ``at`` up to ``limit``; returns its integer count and sets *end (and *wide
 * when a value needs 32 bits). Writes to ``out`` (int32s) or ``narrow`` (uint16s) when given. A
 * FRAME's declared length is checked against all ``size`` bytes of the buffer. */
static Py_ssize_t walk(const unsigned char *data, Py_ssize_t size, Py_ssize_t at, Py_ssize_t limit,
                       Py_ssize_t *end, int *wide, int32_t *out, uint16_t *narrow)
{
    Py_ssize_t count = 0;
    while (at < limit) {
        unsigned char op = data[at];
        if (op == OP_BININT1 && at + 2 <= limit) {
            if (out) out[count] = data[at + 1];
            if (narrow) narrow[count] = data[at + 1];
            at += 2;
        } else if (op == OP_BININT2 && at + 3 <= limit) {
            uint16_t value = (uint16_t)(data[at + 1] | (data[at + 2] << 8));
            if (out) out[count] = value;
            if (narrow) narrow[count] = value;
            at += 3;
        } else if (op == OP_BININT && at + 5 <= limit) {
            uint32_t value = (uint32_t)data[at + 1] | ((uint32_t)data[at + 2] << 8) |
                             ((uint32_t)data[at + 3] << 16) | ((uint32_t)data[at + 4] << 24);
            if (value > 0xFFFF) *wide = 1; /* a negative int32 is above 0xFFFF as unsigned */
            if (out) out[count] = (int32_t)value;
            if (narrow) narrow[count] = (uint16_t)value;
            at += 5;
        } else if (op == OP_FRAME && at + 9 <= limit) {
            uint64_t declared = 0;
            for (int i = 8; i >= 1; i--) declared = (declared << 8) | data[at + i];
            if (declared > (uint64_t)(size - at - 9)) break; /* forged: the interpreter refuses it */
            at += 9;
            continue;
        } else {
            break;
        }
        count++;
    }
    *end = at;
    return count;
}

static PyObject *run(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end = 0, stop = 0, count;
    int wide = 0, again = 0;
    const unsigned char *data;
    PyObject *raw, *result;
    if (!PyArg_ParseTuple(args, "y*n", &view, &start)) return NULL;
    if (start < 0 || start > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start is outside the buffer");
        return NULL;
    }
    data = (const unsigned char *)view.buf;
    /* Measure first (the count, and whether uint16s hold every value), then allocate exactly
     * what was measured and decode the same bytes. */
    count = walk(data, view.len, start, view.len, &end, &wide, NULL, NULL);
    raw = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)(wide ? sizeof(int32_t)
                                                                     : sizeof(uint16_t)));
    if (raw == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (wide)
        walk(data, view.len, start, end, &stop, &again, (int32_t *)PyBytes_AS_STRING(raw), NULL);
    else
        walk(data, view.len, start, end, &stop, &again, NULL, (uint16_t *)PyBytes_AS_STRING(raw));
    PyBuffer_Release(&view);
    result = Py_BuildValue("Nni", raw, end, wide);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "(int32 or uint16 bytes, end, wide) of the integer run at start."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_intruns",
    "C decoding of pickle integer runs (token ids) for crashlab's dump interpreter.", -1, methods,
};

PyMODINIT_FUNC PyInit__intruns(void) { return PyModule_Create(&definition); }

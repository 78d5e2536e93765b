/* C helpers of kaflux's compiled record kernel (_kernel.pyx).
 *
 * - kx_crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78). On x86-64 with
 *   GCC/Clang it uses the SSE4.2 crc32 instruction when the CPU has it (checked once at
 *   run time), processing three independent streams at once and merging them with a
 *   table-driven "append N zero bytes" operator; elsewhere it is table-driven
 *   (slicing-by-8). kx_crc32c_init() must be called once before use.
 * - kx_utf8_valid: strict UTF-8 validation accepting exactly what CPython's strict
 *   "utf-8" decoder accepts (no overlongs, no surrogates, nothing above U+10FFFF).
 * - kx_make_record: builds an instance of a tuple subclass (kaflux.records.Record) of
 *   five items without going through tuple.__new__.
 * - kx_export_*: record columns as Arrow C data interface arrays, for pyarrow to import
 *   without copying.
 */
#ifndef KAFLUX_KERNEL_IMPL_H
#define KAFLUX_KERNEL_IMPL_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

/* setup.py defines this as the SHA-256 of the kernel's sources, so that an out-of-date
 * build in a source checkout can be detected at import time. */
#ifndef KAFLUX_KERNEL_SOURCE_SHA256
#define KAFLUX_KERNEL_SOURCE_SHA256 ""
#endif
static const char *kx_source_sha256 = KAFLUX_KERNEL_SOURCE_SHA256;

/* ------------------------------------------------------------------------------------ */
/* CRC-32C                                                                               */

#define KX_CRC_POLY 0x82F63B78u

static uint32_t kx_crc_table[8][256];   /* slicing-by-8 tables (software path) */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KX_HAVE_SSE42_PATH 1
#define KX_LONG_BLOCK 8192
#define KX_SHORT_BLOCK 256
static uint32_t kx_shift_long[4][256];  /* appends KX_LONG_BLOCK zero bytes to a CRC state */
static uint32_t kx_shift_short[4][256]; /* appends KX_SHORT_BLOCK zero bytes */
static int kx_use_sse42 = 0;
#endif

/* vec times the 32x32 GF(2) matrix mat (mat[i] is the image of bit i). */
static uint32_t kx_gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1u) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void kx_gf2_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = kx_gf2_times(mat, mat[n]);
}

#ifdef KX_HAVE_SSE42_PATH
/* Tables applying the operator "feed `len` zero bytes" (len a power of two, >= 1) to a
 * raw CRC register, one table per register byte. */
static void kx_make_shift_tables(uint32_t tables[4][256], size_t len) {
    uint32_t op[32], sq[32];
    /* one zero bit: shift right, xor the polynomial if the low bit was set */
    op[0] = KX_CRC_POLY;
    for (int n = 1; n < 32; n++) op[n] = 1u << (n - 1);
    /* square three times: 2, 4, then 8 zero bits = one zero byte */
    for (int i = 0; i < 3; i++) {
        kx_gf2_square(sq, op);
        memcpy(op, sq, sizeof(op));
    }
    /* then once per doubling of the byte count */
    for (size_t n = len; n > 1; n >>= 1) {
        kx_gf2_square(sq, op);
        memcpy(op, sq, sizeof(op));
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) tables[k][b] = kx_gf2_times(op, b << (8 * k));
}

static inline uint32_t kx_shift(uint32_t tables[4][256], uint32_t crc) {
    return tables[0][crc & 0xFF] ^ tables[1][(crc >> 8) & 0xFF] ^ tables[2][(crc >> 16) & 0xFF] ^
           tables[3][crc >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t kx_crc32c_sse42(uint32_t crc, const unsigned char *p,
                                                                  size_t n) {
    uint64_t c0 = crc ^ 0xFFFFFFFFu, c1, c2, w0, w1, w2;
    /* three interleaved streams: the crc32 instruction has a 3-cycle latency and a
     * throughput of one per cycle */
    while (n >= 3 * KX_LONG_BLOCK) {
        const unsigned char *end = p + KX_LONG_BLOCK;
        c1 = c2 = 0;
        do {
            memcpy(&w0, p, 8);
            memcpy(&w1, p + KX_LONG_BLOCK, 8);
            memcpy(&w2, p + 2 * KX_LONG_BLOCK, 8);
            c0 = __builtin_ia32_crc32di(c0, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
            p += 8;
        } while (p < end);
        c0 = kx_shift(kx_shift_long, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = kx_shift(kx_shift_long, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * KX_LONG_BLOCK;
        n -= 3 * KX_LONG_BLOCK;
    }
    while (n >= 3 * KX_SHORT_BLOCK) {
        const unsigned char *end = p + KX_SHORT_BLOCK;
        c1 = c2 = 0;
        do {
            memcpy(&w0, p, 8);
            memcpy(&w1, p + KX_SHORT_BLOCK, 8);
            memcpy(&w2, p + 2 * KX_SHORT_BLOCK, 8);
            c0 = __builtin_ia32_crc32di(c0, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
            p += 8;
        } while (p < end);
        c0 = kx_shift(kx_shift_short, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = kx_shift(kx_shift_short, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * KX_SHORT_BLOCK;
        n -= 3 * KX_SHORT_BLOCK;
    }
    while (n >= 8) {
        memcpy(&w0, p, 8);
        c0 = __builtin_ia32_crc32di(c0, w0);
        p += 8;
        n -= 8;
    }
    uint32_t c = (uint32_t)c0;
    while (n--) c = __builtin_ia32_crc32qi(c, *p++);
    return c ^ 0xFFFFFFFFu;
}
#endif /* KX_HAVE_SSE42_PATH */

static uint32_t kx_crc32c_sw(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t c = crc ^ 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 7)) {
        c = kx_crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        /* byte-wise loads: independent of the host's byte order */
        uint32_t lo = c ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                           ((uint32_t)p[3] << 24));
        c = kx_crc_table[7][lo & 0xFF] ^ kx_crc_table[6][(lo >> 8) & 0xFF] ^
            kx_crc_table[5][(lo >> 16) & 0xFF] ^ kx_crc_table[4][lo >> 24] ^ kx_crc_table[3][p[4]] ^
            kx_crc_table[2][p[5]] ^ kx_crc_table[1][p[6]] ^ kx_crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = kx_crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void kx_crc32c_init(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ KX_CRC_POLY : c >> 1;
        kx_crc_table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            kx_crc_table[k][b] = kx_crc_table[0][kx_crc_table[k - 1][b] & 0xFF] ^ (kx_crc_table[k - 1][b] >> 8);
#ifdef KX_HAVE_SSE42_PATH
    kx_make_shift_tables(kx_shift_long, KX_LONG_BLOCK);
    kx_make_shift_tables(kx_shift_short, KX_SHORT_BLOCK);
    __builtin_cpu_init();
    kx_use_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* CRC-32C of p[0:n], continuing from `crc` (0 for a fresh CRC). */
static inline uint32_t kx_crc32c(uint32_t crc, const unsigned char *p, size_t n) {
#ifdef KX_HAVE_SSE42_PATH
    if (kx_use_sse42) return kx_crc32c_sse42(crc, p, n);
#endif
    return kx_crc32c_sw(crc, p, n);
}

/* The software path, whatever the CPU (for tests). */
static inline uint32_t kx_crc32c_portable(uint32_t crc, const unsigned char *p, size_t n) {
    return kx_crc32c_sw(crc, p, n);
}

static inline int kx_crc32c_hardware(void) {
#ifdef KX_HAVE_SSE42_PATH
    return kx_use_sse42;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------------------ */
/* UTF-8                                                                                  */

/* 1 if p[0:n] is well-formed UTF-8 (Unicode Table 3-7), else 0. */
static inline int kx_utf8_valid(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            /* skip ASCII eight bytes at a time */
            while (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ull) break;
                i += 8;
            }
            while (i < n && p[i] < 0x80) i++;
            continue;
        }
        if (c < 0xC2) return 0; /* continuation byte, or overlong 2-byte lead */
        if (c < 0xE0) {
            if (i + 1 >= n || (p[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
            continue;
        }
        if (c < 0xF0) {
            unsigned char lo = 0x80, hi = 0xBF;
            if (c == 0xE0) lo = 0xA0;      /* overlong */
            else if (c == 0xED) hi = 0x9F; /* surrogates */
            if (i + 2 >= n || p[i + 1] < lo || p[i + 1] > hi || (p[i + 2] & 0xC0) != 0x80) return 0;
            i += 3;
            continue;
        }
        if (c < 0xF5) {
            unsigned char lo = 0x80, hi = 0xBF;
            if (c == 0xF0) lo = 0x90;      /* overlong */
            else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
            if (i + 3 >= n || p[i + 1] < lo || p[i + 1] > hi || (p[i + 2] & 0xC0) != 0x80 ||
                (p[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
            continue;
        }
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* Checked arithmetic                                                                     */

/* *r = a + b; returns 1 (and leaves *r unspecified) when the sum does not fit int64. */
static inline int kx_add_overflow(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_add_overflow(a, b, r);
#else
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
    *r = a + b;
    return 0;
#endif
}

/* ------------------------------------------------------------------------------------ */
/* Record tuples                                                                          */

/* An instance of `type` (a tuple subclass without instance dict, checked at import)
 * holding the five items; new reference, or NULL with an exception set. */
static PyObject *kx_make_record(PyObject *type, PyObject *a, PyObject *b, PyObject *c, PyObject *d,
                                PyObject *e) {
#if PY_VERSION_HEX >= 0x030E0000 || defined(KAFLUX_GENERIC_RECORD_NEW)
    /* Newer CPythons may keep per-tuple state (a hash cache) that only tuple's own
     * constructor initialises: go through tuple.__new__(type, items). */
    PyObject *items = PyTuple_Pack(5, a, b, c, d, e);
    if (items == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, items);
    Py_DECREF(items);
    if (args == NULL) return NULL;
    PyObject *record = PyTuple_Type.tp_new((PyTypeObject *)type, args, NULL);
    Py_DECREF(args);
    return record;
#else
    /* What tuple.__new__(type, items) does on 3.11-3.13, without the temporary tuple. */
    PyTypeObject *t = (PyTypeObject *)type;
    PyObject *r = t->tp_alloc(t, 5);
    if (r == NULL) return NULL;
    Py_INCREF(a);
    PyTuple_SET_ITEM(r, 0, a);
    Py_INCREF(b);
    PyTuple_SET_ITEM(r, 1, b);
    Py_INCREF(c);
    PyTuple_SET_ITEM(r, 2, c);
    Py_INCREF(d);
    PyTuple_SET_ITEM(r, 3, d);
    Py_INCREF(e);
    PyTuple_SET_ITEM(r, 4, e);
    return r;
#endif
}

/* A header tuple (key, value), borrowing both. The items are a str and bytes or None,
 * which hold no references, so the tuple is untracked by the garbage collector right away
 * (CPython's collector would untrack it at its first pass anyway). */
static inline PyObject *kx_pair(PyObject *a, PyObject *b) {
    PyObject *r = PyTuple_New(2);
    if (r == NULL) return NULL;
    Py_INCREF(a);
    PyTuple_SET_ITEM(r, 0, a);
    Py_INCREF(b);
    PyTuple_SET_ITEM(r, 1, b);
    if (PyUnicode_CheckExact(a) && (b == Py_None || PyBytes_CheckExact(b))) PyObject_GC_UnTrack(r);
    return r;
}

/* ------------------------------------------------------------------------------------ */
/* Arrow C data interface export                                                          */
/*                                                                                        */
/* The structs are the ABI of https://arrow.apache.org/docs/format/CDataInterface.html.  */
/* kx_export_* hand the column buffers of a RecordColumns to pyarrow without copying:   */
/* one allocation holds the 12 ArrowArray structs of a record batch (8 columns, the      */
/* header list's struct and its 2 fields) and a buffer view of every bytearray, which    */
/* keeps it alive and unresizable until the last array is released.                     */

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#define KX_EXPORT_ARRAYS 12
#define KX_EXPORT_VIEWS 18

typedef struct {
    Py_ssize_t live; /* arrays not released yet; the last release frees everything */
    int n_views;
    Py_buffer views[KX_EXPORT_VIEWS];
    struct ArrowArray arrays[KX_EXPORT_ARRAYS];
    struct ArrowArray *children[KX_EXPORT_ARRAYS];
    const void *buffers[KX_EXPORT_ARRAYS][3];
} kx_export;

/* A zeroed export, or NULL (out of memory). */
static inline kx_export *kx_export_new(void) { return (kx_export *)PyMem_RawCalloc(1, sizeof(kx_export)); }

/* Frees an export whose arrays were never handed out (GIL held). */
static void kx_export_discard(kx_export *e) {
    for (int i = 0; i < e->n_views; i++) PyBuffer_Release(&e->views[i]);
    PyMem_RawFree(e);
}

/* The release callback of every exported array; callable from any thread. Releases the
 * array's children that were not moved out, then the array itself. */
static void kx_export_release(struct ArrowArray *a) {
    if (a->release == NULL) return;
    kx_export *e = (kx_export *)a->private_data;
    PyGILState_STATE gil = PyGILState_Ensure();
    for (int64_t i = 0; i < a->n_children; i++) {
        struct ArrowArray *child = a->children[i];
        if (child->release != NULL) child->release(child);
    }
    a->release = NULL;
    if (--e->live == 0) kx_export_discard(e);
    PyGILState_Release(gil);
}

/* Sets up arrays[index] with up to three buffers (NULL for absent validity bitmaps) and the
 * arrays[first_child .. first_child + n_children) as its children. */
static void kx_export_array(kx_export *e, int index, int64_t length, int64_t null_count, int n_buffers,
                            const void *b0, const void *b1, const void *b2, int first_child,
                            int n_children) {
    struct ArrowArray *a = &e->arrays[index];
    e->buffers[index][0] = b0;
    e->buffers[index][1] = b1;
    e->buffers[index][2] = b2;
    for (int i = 0; i < n_children; i++) e->children[first_child + i] = &e->arrays[first_child + i];
    a->length = length;
    a->null_count = null_count;
    a->offset = 0;
    a->n_buffers = n_buffers;
    a->n_children = n_children;
    a->buffers = e->buffers[index];
    a->children = n_children ? &e->children[first_child] : NULL;
    a->dictionary = NULL;
    a->release = kx_export_release;
    a->private_data = e;
    e->live++;
}

#endif /* KAFLUX_KERNEL_IMPL_H */

/*
 * Host glue of the plimsoll sandbox engine: what QuickJS-NG's quickjs-libc gave the
 * sandbox, rewritten for a guest that has no filesystem, environment or process.
 *
 * Why our own file: the registry sdist carries the engine (quickjs.c and friends) but
 * not quickjs-libc.c, and the sandbox needs only a small, fixed part of it: the
 * `qjs:std` and `qjs:os` modules as far as the sandbox documents them (stdio through
 * the host's capped WASI writer, timers and sleeps on the sandbox's clock), `print` and
 * `console.log`, and the C entry points the host drives (`qjs_init`,
 * `js_std_loop_once`, `js_std_await`, `js_std_dump_error`,
 * `js_module_set_import_meta`). Every file, directory and environment function the
 * guest can call answers "not capable" here without asking WASI; the host's WASI layer
 * (runtime/sandbox/wasi.py) refuses them as well, so neither side alone is trusted.
 *
 * Time goes through wasi-libc's clock_gettime and nanosleep, that is through the
 * host's `clock_time_get` and `poll_oneoff`, so timers and sleeps follow the run's
 * clock (real or fixed, and never blocking: a sleep moves the guest's clock forward).
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "quickjs.h"
#include "cutils.h"
#include "list.h"

#define EXPORT(name) __attribute__((export_name(#name)))
#define countof(a) (sizeof(a) / sizeof((a)[0]))

/* The errno every filesystem and environment call of the guest gets. */
#define GUEST_NO_ACCESS ENOTCAPABLE

typedef struct {
    struct list_head link;
    int64_t id;       /* > 0 for setTimeout/setInterval, -1 for sleepAsync */
    int64_t timeout;  /* monotonic ms at which it is due */
    int64_t delay;    /* the repeat period of an interval */
    int repeats;
    JSValue func;
} GuestTimer;

static JSRuntime *glue_rt;
static JSContext *glue_ctx;
static struct list_head glue_timers;
static int64_t glue_next_timer_id = 1;
static JSClassID glue_file_class;

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- print, console.log and error dumps --------------------------------------- */

static void write_value_line(JSContext *ctx, FILE *f, JSValueConst val)
{
    const char *s = JS_ToCString(ctx, val);
    if (s) {
        fprintf(f, "%s\n", s);
        JS_FreeCString(ctx, s);
    } else {
        JS_FreeValue(ctx, JS_GetException(ctx));
        fputs("[exception]\n", f);
    }
}

static JSValue glue_print(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    for (int i = 0; i < argc; i++) {
        /* With its length, so a string holding NUL is written whole, as node writes it
           (fputs would stop at the first NUL). */
        size_t len = 0;
        const char *s = JS_ToCStringLen(ctx, &len, argv[i]);
        if (!s && JS_IsObject(argv[i])) {
            /* an object whose toString throws still prints as [object Object] */
            JS_FreeValue(ctx, JS_GetException(ctx));
            JSValue t = JS_ToObjectString(ctx, argv[i]);
            s = JS_ToCStringLen(ctx, &len, t);
            JS_FreeValue(ctx, t);
        }
        if (i)
            fputc(' ', stdout);
        if (s) {
            fwrite(s, 1, len, stdout);
            JS_FreeCString(ctx, s);
        } else {
            JS_FreeValue(ctx, JS_GetException(ctx));
            fputs("<exception>", stdout);
        }
    }
    fputc('\n', stdout);
    fflush(stdout);
    return JS_UNDEFINED;
}

#define MAX_CAUSE_DEPTH 10

static void dump_error_value(JSContext *ctx, JSValueConst exception)
{
    JSValue current = JS_DupValue(ctx, exception);
    for (int depth = 0;; depth++) {
        int is_error = JS_IsError(current);
        write_value_line(ctx, stderr, current);
        if (is_error) {
            JSValue stack = JS_GetPropertyStr(ctx, current, "stack");
            if (JS_IsException(stack))
                JS_FreeValue(ctx, JS_GetException(ctx));
            else if (!JS_IsUndefined(stack))
                write_value_line(ctx, stderr, stack);
            JS_FreeValue(ctx, stack);
        }
        if (!is_error || depth >= MAX_CAUSE_DEPTH)
            break;
        JSValue cause = JS_GetPropertyStr(ctx, current, "cause");
        if (JS_IsException(cause)) {
            JS_FreeValue(ctx, JS_GetException(ctx));
            break;
        }
        if (JS_IsUndefined(cause))
            break;
        fputs("Caused by: ", stderr);
        JS_FreeValue(ctx, current);
        current = cause;
    }
    JS_FreeValue(ctx, current);
    fflush(stderr);
}

EXPORT(js_std_dump_error)
void js_std_dump_error(JSContext *ctx)
{
    JSValue exception = JS_GetException(ctx);
    dump_error_value(ctx, exception);
    JS_FreeValue(ctx, exception);
}

/* ---- timers -------------------------------------------------------------------- */

static void free_timer(JSRuntime *rt, GuestTimer *t)
{
    list_del(&t->link);
    JS_FreeValueRT(rt, t->func);
    js_free_rt(rt, t);
}

static JSValue glue_set_timer(JSContext *ctx, JSValueConst this_val, int argc,
                              JSValueConst *argv, int repeats)
{
    int64_t delay;
    if (!JS_IsFunction(ctx, argv[0]))
        return JS_ThrowTypeError(ctx, "not a function");
    if (JS_ToInt64(ctx, &delay, argv[1]))
        return JS_EXCEPTION;
    if (delay < 1)
        delay = 1;
    GuestTimer *t = js_mallocz(ctx, sizeof(*t));
    if (!t)
        return JS_EXCEPTION;
    t->id = glue_next_timer_id++;
    if (glue_next_timer_id > (((int64_t)1 << 53) - 1))
        glue_next_timer_id = 1;
    t->repeats = repeats;
    t->delay = delay;
    t->timeout = monotonic_ms() + delay;
    t->func = JS_DupValue(ctx, argv[0]);
    list_add_tail(&t->link, &glue_timers);
    return JS_NewInt64(ctx, t->id);
}

static JSValue glue_clear_timer(JSContext *ctx, JSValueConst this_val, int argc,
                                JSValueConst *argv)
{
    int64_t id;
    struct list_head *el;
    if (JS_ToInt64(ctx, &id, argv[0]))
        return JS_EXCEPTION;
    if (id <= 0)
        return JS_UNDEFINED;
    list_for_each(el, &glue_timers) {
        GuestTimer *t = list_entry(el, GuestTimer, link);
        if (t->id == id) {
            free_timer(JS_GetRuntime(ctx), t);
            break;
        }
    }
    return JS_UNDEFINED;
}

static JSValue glue_sleep_async(JSContext *ctx, JSValueConst this_val, int argc,
                                JSValueConst *argv)
{
    int64_t delay;
    JSValue funcs[2];
    if (JS_ToInt64(ctx, &delay, argv[0]))
        return JS_EXCEPTION;
    JSValue promise = JS_NewPromiseCapability(ctx, funcs);
    if (JS_IsException(promise))
        return promise;
    GuestTimer *t = js_mallocz(ctx, sizeof(*t));
    if (!t) {
        JS_FreeValue(ctx, promise);
        JS_FreeValue(ctx, funcs[0]);
        JS_FreeValue(ctx, funcs[1]);
        return JS_EXCEPTION;
    }
    t->id = -1;
    t->timeout = monotonic_ms() + delay;
    t->func = funcs[0];
    JS_FreeValue(ctx, funcs[1]);
    list_add_tail(&t->link, &glue_timers);
    return promise;
}

/* Runs the first due timer in creation order, if any. *min_delay: -1 no timer, 0 one
   ran (or is due), else ms to the earliest. Returns -1 when its callback threw. */
static int run_timers(JSContext *ctx, int *min_delay)
{
    struct list_head *el;
    if (list_empty(&glue_timers)) {
        *min_delay = -1;
        return 0;
    }
    int64_t now = monotonic_ms();
    *min_delay = INT32_MAX;
    list_for_each(el, &glue_timers) {
        GuestTimer *t = list_entry(el, GuestTimer, link);
        int64_t left = t->timeout - now;
        if (left > 0) {
            if (left < *min_delay)
                *min_delay = (int)left;
            continue;
        }
        *min_delay = 0;
        JSValue func = JS_DupValue(ctx, t->func);
        if (t->repeats)
            t->timeout = now + t->delay;
        else
            free_timer(JS_GetRuntime(ctx), t);
        JSValue ret = JS_Call(ctx, func, JS_UNDEFINED, 0, NULL);
        JS_FreeValue(ctx, func);
        int failed = JS_IsException(ret);
        JS_FreeValue(ctx, ret);
        return failed ? -1 : 0;
    }
    return 0;
}

/* One turn of the loop: every pending job, then at most one due timer. 0 when more
   work is ready, > 0 the ms to the next timer, -1 idle, -2 a job or timer threw (the
   exception is pending). */
EXPORT(js_std_loop_once)
int js_std_loop_once(JSContext *ctx)
{
    JSRuntime *rt = JS_GetRuntime(ctx);
    JSContext *job_ctx;
    int err, min_delay;
    for (;;) {
        err = JS_ExecutePendingJob(rt, &job_ctx);
        if (err < 0)
            return -2;
        if (err == 0)
            break;
    }
    if (run_timers(ctx, &min_delay) < 0)
        return -2;
    if (JS_IsJobPending(rt) || min_delay == 0)
        return 0;
    return min_delay > 0 ? min_delay : -1;
}

/* Settles `obj` (a promise) by running jobs and timers; takes ownership of it. A
   promise nothing can settle any more is an InternalError, never an endless spin. */
EXPORT(js_std_await)
JSValue js_std_await(JSContext *ctx, JSValue obj)
{
    JSRuntime *rt = JS_GetRuntime(ctx);
    for (;;) {
        JSPromiseStateEnum state = JS_PromiseState(ctx, obj);
        if (state == JS_PROMISE_FULFILLED) {
            JSValue ret = JS_PromiseResult(ctx, obj);
            JS_FreeValue(ctx, obj);
            return ret;
        }
        if (state == JS_PROMISE_REJECTED) {
            JSValue ret = JS_Throw(ctx, JS_PromiseResult(ctx, obj));
            JS_FreeValue(ctx, obj);
            return ret;
        }
        if (state != JS_PROMISE_PENDING)
            return obj; /* not a promise: its own value */
        JSContext *job_ctx;
        int err = JS_ExecutePendingJob(rt, &job_ctx);
        if (err < 0) {
            js_std_dump_error(job_ctx);
            continue;
        }
        if (err > 0)
            continue;
        int min_delay;
        if (run_timers(ctx, &min_delay) < 0) {
            js_std_dump_error(ctx);
            continue;
        }
        if (min_delay > 0) {
            struct timespec ts = {min_delay / 1000, (long)(min_delay % 1000) * 1000000};
            nanosleep(&ts, NULL);
        } else if (min_delay < 0) {
            JS_FreeValue(ctx, obj);
            return JS_ThrowInternalError(ctx, "promise can never settle");
        }
    }
}

/* ---- qjs:std ------------------------------------------------------------------- */

typedef struct {
    FILE *f;
} GuestFile;

static FILE *file_of(JSContext *ctx, JSValueConst this_val)
{
    GuestFile *gf = JS_GetOpaque2(ctx, this_val, glue_file_class);
    if (!gf)
        return NULL;
    if (!gf->f) {
        JS_ThrowTypeError(ctx, "invalid file handle");
        return NULL;
    }
    return gf->f;
}

static JSValue file_puts(JSContext *ctx, FILE *f, int argc, JSValueConst *argv)
{
    for (int i = 0; i < argc; i++) {
        size_t len;
        const char *s = JS_ToCStringLen(ctx, &len, argv[i]);
        if (!s)
            return JS_EXCEPTION;
        fwrite(s, 1, len, f);
        JS_FreeCString(ctx, s);
    }
    return JS_UNDEFINED;
}

static JSValue glue_file_puts(JSContext *ctx, JSValueConst this_val, int argc,
                              JSValueConst *argv)
{
    FILE *f = file_of(ctx, this_val);
    return f ? file_puts(ctx, f, argc, argv) : JS_EXCEPTION;
}

static JSValue glue_std_puts(JSContext *ctx, JSValueConst this_val, int argc,
                             JSValueConst *argv)
{
    return file_puts(ctx, stdout, argc, argv);
}

static JSValue glue_file_flush(JSContext *ctx, JSValueConst this_val, int argc,
                               JSValueConst *argv)
{
    FILE *f = file_of(ctx, this_val);
    if (!f)
        return JS_EXCEPTION;
    fflush(f);
    return JS_UNDEFINED;
}

/* read/write(buffer, position, length) on an ArrayBuffer, as quickjs-libc's */
static JSValue glue_file_rw(JSContext *ctx, JSValueConst this_val, int argc,
                            JSValueConst *argv, int is_write)
{
    FILE *f = file_of(ctx, this_val);
    uint64_t pos, len;
    size_t size;
    if (!f)
        return JS_EXCEPTION;
    if (JS_ToIndex(ctx, &pos, argv[1]) || JS_ToIndex(ctx, &len, argv[2]))
        return JS_EXCEPTION;
    uint8_t *buf = JS_GetArrayBuffer(ctx, &size, argv[0]);
    if (!buf)
        return JS_EXCEPTION;
    if (pos + len > size)
        return JS_ThrowRangeError(ctx, "read/write array buffer overflow");
    size_t n = is_write ? fwrite(buf + pos, 1, len, f) : fread(buf + pos, 1, len, f);
    return JS_NewInt64(ctx, (int64_t)n);
}

static JSValue glue_file_getline(JSContext *ctx, JSValueConst this_val, int argc,
                                 JSValueConst *argv)
{
    FILE *f = file_of(ctx, this_val);
    if (!f)
        return JS_EXCEPTION;
    int c = fgetc(f);
    if (c == EOF)
        return JS_NULL;
    /* stdin is the only readable stream and is always at its end: a line is never
       longer than what is buffered, but read it whole anyway */
    size_t cap = 64, n = 0;
    char *line = js_malloc(ctx, cap);
    if (!line)
        return JS_EXCEPTION;
    while (c != EOF && c != '\n') {
        if (n + 1 >= cap) {
            char *grown = js_realloc(ctx, line, cap * 2);
            if (!grown) {
                js_free(ctx, line);
                return JS_EXCEPTION;
            }
            line = grown;
            cap *= 2;
        }
        line[n++] = (char)c;
        c = fgetc(f);
    }
    JSValue s = JS_NewStringLen(ctx, line, n);
    js_free(ctx, line);
    return s;
}

static JSValue glue_file_get_byte(JSContext *ctx, JSValueConst this_val, int argc,
                                  JSValueConst *argv)
{
    FILE *f = file_of(ctx, this_val);
    return f ? JS_NewInt32(ctx, fgetc(f)) : JS_EXCEPTION;
}

static JSValue glue_file_put_byte(JSContext *ctx, JSValueConst this_val, int argc,
                                  JSValueConst *argv)
{
    FILE *f = file_of(ctx, this_val);
    int c;
    if (!f || JS_ToInt32(ctx, &c, argv[0]))
        return JS_EXCEPTION;
    return JS_NewInt32(ctx, fputc(c, f));
}

static JSValue glue_file_eof(JSContext *ctx, JSValueConst this_val, int argc,
                             JSValueConst *argv)
{
    FILE *f = file_of(ctx, this_val);
    return f ? JS_NewBool(ctx, feof(f)) : JS_EXCEPTION;
}

static JSValue glue_file_fileno(JSContext *ctx, JSValueConst this_val, int argc,
                                JSValueConst *argv)
{
    FILE *f = file_of(ctx, this_val);
    return f ? JS_NewInt32(ctx, fileno(f)) : JS_EXCEPTION;
}

static const JSCFunctionListEntry glue_file_proto[] = {
    JS_CFUNC_DEF("puts", 1, glue_file_puts),
    JS_CFUNC_DEF("flush", 0, glue_file_flush),
    JS_CFUNC_MAGIC_DEF("read", 3, glue_file_rw, 0),
    JS_CFUNC_MAGIC_DEF("write", 3, glue_file_rw, 1),
    JS_CFUNC_DEF("getline", 0, glue_file_getline),
    JS_CFUNC_DEF("getByte", 0, glue_file_get_byte),
    JS_CFUNC_DEF("putByte", 1, glue_file_put_byte),
    JS_CFUNC_DEF("eof", 0, glue_file_eof),
    JS_CFUNC_DEF("fileno", 0, glue_file_fileno),
};

static JSClassDef glue_file_class_def = {"FILE", NULL};

static JSValue new_file(JSContext *ctx, FILE *f)
{
    JSValue obj = JS_NewObjectClass(ctx, glue_file_class);
    if (JS_IsException(obj))
        return obj;
    GuestFile *gf = js_mallocz(ctx, sizeof(*gf));
    if (!gf) {
        JS_FreeValue(ctx, obj);
        return JS_EXCEPTION;
    }
    gf->f = f;
    JS_SetOpaque(obj, gf);
    return obj;
}

static void glue_file_finalizer(JSRuntime *rt, JSValueConst val)
{
    js_free_rt(rt, JS_GetOpaque(val, glue_file_class));
}

static JSValue glue_std_exit(JSContext *ctx, JSValueConst this_val, int argc,
                             JSValueConst *argv)
{
    int status;
    if (JS_ToInt32(ctx, &status, argv[0]))
        status = -1;
    fflush(stdout);
    fflush(stderr);
    exit(status); /* WASI proc_exit: the host ends the run with this code */
}

static JSValue glue_std_null(JSContext *ctx, JSValueConst this_val, int argc,
                             JSValueConst *argv)
{
    return JS_NULL; /* loadFile, open, fdopen: no file can be opened */
}

static JSValue glue_std_undefined(JSContext *ctx, JSValueConst this_val, int argc,
                                  JSValueConst *argv)
{
    return JS_UNDEFINED; /* getenv: the guest has no environment */
}

static JSValue glue_std_getenviron(JSContext *ctx, JSValueConst this_val, int argc,
                                   JSValueConst *argv)
{
    return JS_NewObject(ctx);
}

static JSValue glue_std_strerror(JSContext *ctx, JSValueConst this_val, int argc,
                                 JSValueConst *argv)
{
    int err;
    if (JS_ToInt32(ctx, &err, argv[0]))
        return JS_EXCEPTION;
    return JS_NewString(ctx, strerror(err));
}

static JSValue glue_std_gc(JSContext *ctx, JSValueConst this_val, int argc,
                           JSValueConst *argv)
{
    JS_RunGC(JS_GetRuntime(ctx));
    return JS_UNDEFINED;
}

static const JSCFunctionListEntry glue_std_errors[] = {
    JS_PROP_INT32_DEF("EINVAL", EINVAL, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("EIO", EIO, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("EACCES", EACCES, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("EEXIST", EEXIST, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("ENOSPC", ENOSPC, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("ENOSYS", ENOSYS, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("EBUSY", EBUSY, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("ENOENT", ENOENT, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("EPERM", EPERM, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("EPIPE", EPIPE, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("EBADF", EBADF, JS_PROP_CONFIGURABLE),
};

static const JSCFunctionListEntry glue_std_funcs[] = {
    JS_CFUNC_DEF("exit", 1, glue_std_exit),
    JS_CFUNC_DEF("gc", 0, glue_std_gc),
    JS_CFUNC_DEF("puts", 1, glue_std_puts),
    JS_CFUNC_DEF("loadFile", 1, glue_std_null),
    JS_CFUNC_DEF("open", 2, glue_std_null),
    JS_CFUNC_DEF("fdopen", 2, glue_std_null),
    JS_CFUNC_DEF("getenv", 1, glue_std_undefined),
    JS_CFUNC_DEF("getenviron", 0, glue_std_getenviron),
    JS_CFUNC_DEF("strerror", 1, glue_std_strerror),
    JS_PROP_INT32_DEF("SEEK_SET", SEEK_SET, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("SEEK_CUR", SEEK_CUR, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("SEEK_END", SEEK_END, JS_PROP_CONFIGURABLE),
    JS_OBJECT_DEF("Error", glue_std_errors, countof(glue_std_errors), JS_PROP_CONFIGURABLE),
};

static int glue_std_init(JSContext *ctx, JSModuleDef *m)
{
    if (JS_SetModuleExportList(ctx, m, glue_std_funcs, countof(glue_std_funcs)))
        return -1;
    JS_SetModuleExport(ctx, m, "in", new_file(ctx, stdin));
    JS_SetModuleExport(ctx, m, "out", new_file(ctx, stdout));
    JS_SetModuleExport(ctx, m, "err", new_file(ctx, stderr));
    return 0;
}

/* ---- qjs:os -------------------------------------------------------------------- */

static JSValue glue_os_rw(JSContext *ctx, JSValueConst this_val, int argc,
                          JSValueConst *argv, int is_write)
{
    int fd;
    uint64_t pos, len;
    size_t size;
    if (JS_ToInt32(ctx, &fd, argv[0]) || JS_ToIndex(ctx, &pos, argv[2]) ||
        JS_ToIndex(ctx, &len, argv[3]))
        return JS_EXCEPTION;
    uint8_t *buf = JS_GetArrayBuffer(ctx, &size, argv[1]);
    if (!buf)
        return JS_EXCEPTION;
    if (pos + len > size)
        return JS_ThrowRangeError(ctx, "read/write array buffer overflow");
    /* stdio first, so bytes already buffered come out before these */
    if (is_write && (fd == 1 || fd == 2))
        fflush(fd == 1 ? stdout : stderr);
    ssize_t n = is_write ? write(fd, buf + pos, len) : read(fd, buf + pos, len);
    return JS_NewInt64(ctx, n < 0 ? -(int64_t)errno : (int64_t)n);
}

static JSValue glue_os_no_access(JSContext *ctx, JSValueConst this_val, int argc,
                                 JSValueConst *argv)
{
    return JS_NewInt32(ctx, -GUEST_NO_ACCESS); /* open, remove, rename, mkdir */
}

static JSValue glue_os_no_access_pair(JSContext *ctx, JSValueConst this_val, int argc,
                                      JSValueConst *argv, int magic)
{
    /* readdir -> [[], errno]; stat -> [null, errno], as quickjs-libc reports a failure */
    JSValue pair = JS_NewArray(ctx);
    if (JS_IsException(pair))
        return pair;
    JS_SetPropertyUint32(ctx, pair, 0, magic ? JS_NULL : JS_NewArray(ctx));
    JS_SetPropertyUint32(ctx, pair, 1, JS_NewInt32(ctx, GUEST_NO_ACCESS));
    return pair;
}

static JSValue glue_os_close(JSContext *ctx, JSValueConst this_val, int argc,
                             JSValueConst *argv)
{
    return JS_NewInt32(ctx, -EBADF); /* the guest can open nothing it could close */
}

static JSValue glue_os_isatty(JSContext *ctx, JSValueConst this_val, int argc,
                              JSValueConst *argv)
{
    return JS_FALSE;
}

static JSValue glue_os_sleep(JSContext *ctx, JSValueConst this_val, int argc,
                             JSValueConst *argv)
{
    int64_t ms;
    if (JS_ToInt64(ctx, &ms, argv[0]))
        return JS_EXCEPTION;
    if (ms < 0)
        ms = 0;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    return JS_NewInt32(ctx, nanosleep(&ts, NULL));
}

static JSValue glue_os_now(JSContext *ctx, JSValueConst this_val, int argc,
                           JSValueConst *argv)
{
    return JS_NewInt64(ctx, monotonic_us());
}

static JSValue glue_os_getcwd(JSContext *ctx, JSValueConst this_val, int argc,
                              JSValueConst *argv)
{
    JSValue pair = JS_NewArray(ctx);
    if (JS_IsException(pair))
        return pair;
    JS_SetPropertyUint32(ctx, pair, 0, JS_NewString(ctx, "/"));
    JS_SetPropertyUint32(ctx, pair, 1, JS_NewInt32(ctx, 0));
    return pair;
}

static const JSCFunctionListEntry glue_os_funcs[] = {
    JS_CFUNC_DEF("open", 2, glue_os_no_access),
    JS_CFUNC_DEF("remove", 1, glue_os_no_access),
    JS_CFUNC_DEF("rename", 2, glue_os_no_access),
    JS_CFUNC_DEF("mkdir", 1, glue_os_no_access),
    JS_CFUNC_MAGIC_DEF("readdir", 1, glue_os_no_access_pair, 0),
    JS_CFUNC_MAGIC_DEF("stat", 1, glue_os_no_access_pair, 1),
    JS_CFUNC_MAGIC_DEF("lstat", 1, glue_os_no_access_pair, 1),
    JS_CFUNC_DEF("close", 1, glue_os_close),
    JS_CFUNC_MAGIC_DEF("read", 4, glue_os_rw, 0),
    JS_CFUNC_MAGIC_DEF("write", 4, glue_os_rw, 1),
    JS_CFUNC_DEF("isatty", 1, glue_os_isatty),
    JS_CFUNC_DEF("getcwd", 0, glue_os_getcwd),
    JS_CFUNC_DEF("sleep", 1, glue_os_sleep),
    JS_CFUNC_DEF("sleepAsync", 1, glue_sleep_async),
    JS_CFUNC_DEF("now", 0, glue_os_now),
    JS_CFUNC_MAGIC_DEF("setTimeout", 2, glue_set_timer, 0),
    JS_CFUNC_MAGIC_DEF("setInterval", 2, glue_set_timer, 1),
    JS_CFUNC_DEF("clearTimeout", 1, glue_clear_timer),
    JS_CFUNC_DEF("clearInterval", 1, glue_clear_timer),
    JS_PROP_STRING_DEF("platform", "wasi", 0),
    JS_PROP_INT32_DEF("O_RDONLY", 0x04000000, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("O_WRONLY", 0x10000000, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("O_RDWR", 0x14000000, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("O_APPEND", 1, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("O_CREAT", 1 << 12, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("O_EXCL", 4 << 12, JS_PROP_CONFIGURABLE),
    JS_PROP_INT32_DEF("O_TRUNC", 8 << 12, JS_PROP_CONFIGURABLE),
};

static int glue_os_init(JSContext *ctx, JSModuleDef *m)
{
    return JS_SetModuleExportList(ctx, m, glue_os_funcs, countof(glue_os_funcs));
}

/* ---- replies ------------------------------------------------------------------ */

/* Define `name` on `obj`, taking `value` (freed on failure too); 0 when `ok` was
   already 0, so a chain of them frees every value whatever failed first. */
static int define_owned(JSContext *ctx, int ok, JSValueConst obj, const char *name,
                        JSValue value, int flags)
{
    if (!ok) {
        JS_FreeValue(ctx, value);
        return 0;
    }
    return JS_DefinePropertyValueStr(ctx, obj, name, value, flags) >= 0;
}

/* A host call's reply: `{status, body}` with a non-enumerable `type` and, when
   `headers_len` is not negative (an upstream's answer), a non-enumerable `headers`.
   `text` holds the body's bytes, then the type's, then the headers' JSON, so the host
   writes one buffer and makes one call instead of a dozen across the module's edge.
   The body is a string of those bytes as UTF-8 (the host has made them well formed) or,
   when `binary`, a Uint8Array copy of them.

   A new object given its own data properties by definition, never assignment, so a
   setter on Object.prototype can neither intercept nor hide them; and not
   JS_NewObjectFromStr, which in QuickJS-NG 0.15 grew the shape every empty object
   shares (tests/runtime/test_reply_object_shape.py). Returns the exception, pending,
   when memory runs out. */
EXPORT(plimsoll_reply)
JSValue plimsoll_reply(JSContext *ctx, int32_t status, const char *text, size_t body_len,
                       int32_t binary, size_t type_len, int64_t headers_len)
{
    JSValue body = binary ? JS_NewUint8ArrayCopy(ctx, (const uint8_t *)text, body_len)
                          : JS_NewStringLen(ctx, text, body_len);
    if (JS_IsException(body))
        return body;
    JSValue kind = JS_NewStringLen(ctx, text + body_len, type_len);
    if (JS_IsException(kind)) {
        JS_FreeValue(ctx, body);
        return kind;
    }
    JSValue names = JS_UNDEFINED;
    if (headers_len >= 0) {
        names = JS_NewStringLen(ctx, text + body_len + type_len, (size_t)headers_len);
        if (JS_IsException(names)) {
            JS_FreeValue(ctx, body);
            JS_FreeValue(ctx, kind);
            return names;
        }
    }
    JSValue obj = JS_NewObject(ctx);
    if (JS_IsException(obj)) {
        JS_FreeValue(ctx, body);
        JS_FreeValue(ctx, kind);
        JS_FreeValue(ctx, names);
        return obj;
    }
    int ok = define_owned(ctx, 1, obj, "status", JS_NewInt32(ctx, status), JS_PROP_C_W_E);
    ok = define_owned(ctx, ok, obj, "body", body, JS_PROP_C_W_E);
    ok = define_owned(ctx, ok, obj, "type", kind, JS_PROP_CONFIGURABLE | JS_PROP_WRITABLE);
    if (headers_len >= 0)
        ok = define_owned(ctx, ok, obj, "headers", names,
                          JS_PROP_CONFIGURABLE | JS_PROP_WRITABLE);
    if (ok)
        return obj;
    JS_FreeValue(ctx, obj);
    return JS_EXCEPTION;
}

/* Settle a started call's promise: call `target` (its resolve or reject) with `value`,
   drop what the call returned or threw, and free all three values and the other
   resolving function. One call across the module's edge per settled promise. */
EXPORT(plimsoll_settle)
void plimsoll_settle(JSContext *ctx, JSValue target, JSValue other, JSValue value)
{
    JSValue result = JS_Call(ctx, target, JS_UNDEFINED, 1, (JSValueConst *)&value);
    if (JS_IsException(result))
        JS_FreeValue(ctx, JS_GetException(ctx));
    else
        JS_FreeValue(ctx, result);
    JS_FreeValue(ctx, value);
    JS_FreeValue(ctx, target);
    JS_FreeValue(ctx, other);
}

/* ---- bodies of bytes --------------------------------------------------------- */

/* %TypedArray%.prototype's `byteLength` getter, taken in qjs_init before any guest code
   runs, so a guest that redefines it (or gives its view an own `byteLength`) changes
   nothing here. It is a C function of the engine's and runs no guest code. */
static JSValue glue_byte_length_getter;

/* The bytes of a Uint8Array the host is to send: a pointer into linear memory and their
   count, or NULL (an exception pending) when `obj` is not a Uint8Array or its buffer is
   detached or out of bounds. Not JS_GetUint8Array's count alone: for a view that tracks
   a resizable ArrayBuffer's length (`new Uint8Array(rab)`) that is the length the view
   had when it was made, so after `rab.resize(10)` the host read thousands of bytes past
   the buffer's end (freed heap, sent upstream), and after a grow it sent too few. The
   engine's own getter gives the view's length now. */
EXPORT(plimsoll_uint8_bytes)
uint8_t *plimsoll_uint8_bytes(JSContext *ctx, size_t *psize, JSValueConst obj)
{
    size_t made_with;
    int64_t now;
    uint8_t *ptr = JS_GetUint8Array(ctx, &made_with, obj);
    *psize = 0;
    if (!ptr)
        return NULL;
    JSValue len = JS_Call(ctx, glue_byte_length_getter, obj, 0, NULL);
    if (JS_IsException(len))
        return NULL;
    if (!JS_IsNumber(len) || JS_ToInt64(ctx, &now, len) || now < 0) {
        JS_FreeValue(ctx, len);
        JS_ThrowTypeError(ctx, "not a Uint8Array");
        return NULL;
    }
    *psize = (size_t)now;
    return ptr;
}

static int capture_intrinsics(JSContext *ctx)
{
    static const char src[] =
        "Object.getOwnPropertyDescriptor("
        "Object.getPrototypeOf(Uint8Array.prototype), 'byteLength').get";
    glue_byte_length_getter = JS_Eval(ctx, src, sizeof(src) - 1, "<glue>", JS_EVAL_TYPE_GLOBAL);
    if (!JS_IsFunction(ctx, glue_byte_length_getter))
        return -1;
    return 0;
}

/* ---- modules and the context ---------------------------------------------------- */

static JSModuleDef *glue_module_loader(JSContext *ctx, const char *name, void *opaque,
                                       JSValueConst attributes)
{
    /* Only the built-in modules exist; nothing is read from anywhere. */
    JS_ThrowReferenceError(ctx, "could not load module '%s'", name);
    return NULL;
}

/* import.meta of the evaluated module: url (its name, as a file URL when it has no
   scheme) and main, as quickjs-libc sets them (there is no file to resolve). */
EXPORT(js_module_set_import_meta)
int js_module_set_import_meta(JSContext *ctx, JSValueConst func_val, bool use_realpath,
                              bool is_main)
{
    if (JS_VALUE_GET_TAG(func_val) != JS_TAG_MODULE)
        return -1;
    JSModuleDef *m = JS_VALUE_GET_PTR(func_val);
    JSAtom atom = JS_GetModuleName(ctx, m);
    const char *name = JS_AtomToCString(ctx, atom);
    JS_FreeAtom(ctx, atom);
    if (!name)
        return -1;
    size_t len = strlen(name) + sizeof("file://");
    char *url = js_malloc(ctx, len);
    if (!url) {
        JS_FreeCString(ctx, name);
        return -1;
    }
    snprintf(url, len, "%s%s", strchr(name, ':') ? "" : "file://", name);
    JS_FreeCString(ctx, name);
    JSValue meta = JS_GetImportMeta(ctx, m);
    if (JS_IsException(meta)) {
        js_free(ctx, url);
        return -1;
    }
    JS_DefinePropertyValueStr(ctx, meta, "url", JS_NewString(ctx, url), JS_PROP_C_W_E);
    JS_DefinePropertyValueStr(ctx, meta, "main", JS_NewBool(ctx, is_main), JS_PROP_C_W_E);
    js_free(ctx, url);
    JS_FreeValue(ctx, meta);
    return 0;
}

static JSValue glue_gc(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    JS_RunGC(JS_GetRuntime(ctx));
    return JS_UNDEFINED;
}

static JSValue glue_user_agent(JSContext *ctx, JSValueConst this_val)
{
    char ua[64];
    snprintf(ua, sizeof(ua), "quickjs-ng/%s", JS_GetVersion());
    return JS_NewString(ctx, ua);
}

static const JSCFunctionListEntry glue_navigator_proto[] = {
    JS_CGETSET_DEF("userAgent", glue_user_agent, NULL),
    JS_PROP_STRING_DEF("[Symbol.toStringTag]", "Navigator", JS_PROP_CONFIGURABLE),
};

static int add_globals(JSContext *ctx)
{
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue console = JS_NewObject(ctx);
    JS_SetPropertyStr(ctx, console, "log", JS_NewCFunction(ctx, glue_print, "log", 1));
    JS_SetPropertyStr(ctx, global, "console", console);
    JS_SetPropertyStr(ctx, global, "print", JS_NewCFunction(ctx, glue_print, "print", 1));
    JS_SetPropertyStr(ctx, global, "scriptArgs", JS_NewArray(ctx));
    JS_SetPropertyStr(ctx, global, "gc", JS_NewCFunction(ctx, glue_gc, "gc", 0));
    JSValue proto = JS_NewObject(ctx);
    JS_SetPropertyFunctionList(ctx, proto, glue_navigator_proto, countof(glue_navigator_proto));
    JSValue navigator = JS_NewObjectProto(ctx, proto);
    JS_DefinePropertyValueStr(ctx, global, "navigator", navigator,
                              JS_PROP_CONFIGURABLE | JS_PROP_ENUMERABLE);
    JS_FreeValue(ctx, proto);
    JS_FreeValue(ctx, global);
    return 0;
}

/* The runtime and context of this instance (one of each): 0 on success. */
EXPORT(qjs_init)
int qjs_init(void)
{
    if (glue_rt)
        return -1;
    init_list_head(&glue_timers);
    glue_rt = JS_NewRuntime();
    if (!glue_rt)
        return -1;
    JS_NewClassID(glue_rt, &glue_file_class);
    glue_file_class_def.finalizer = glue_file_finalizer;
    if (JS_NewClass(glue_rt, glue_file_class, &glue_file_class_def) < 0)
        return -1;
    glue_ctx = JS_NewContext(glue_rt);
    if (!glue_ctx)
        return -1;
    JSValue proto = JS_NewObject(glue_ctx);
    JS_SetPropertyFunctionList(glue_ctx, proto, glue_file_proto, countof(glue_file_proto));
    JS_SetClassProto(glue_ctx, glue_file_class, proto);
    JSModuleDef *std_mod = JS_NewCModule(glue_ctx, "qjs:std", glue_std_init);
    if (!std_mod)
        return -1;
    JS_AddModuleExportList(glue_ctx, std_mod, glue_std_funcs, countof(glue_std_funcs));
    JS_AddModuleExport(glue_ctx, std_mod, "in");
    JS_AddModuleExport(glue_ctx, std_mod, "out");
    JS_AddModuleExport(glue_ctx, std_mod, "err");
    JSModuleDef *os_mod = JS_NewCModule(glue_ctx, "qjs:os", glue_os_init);
    if (!os_mod)
        return -1;
    JS_AddModuleExportList(glue_ctx, os_mod, glue_os_funcs, countof(glue_os_funcs));
    JS_SetModuleLoaderFunc2(glue_rt, NULL, glue_module_loader, NULL, NULL);
    if (capture_intrinsics(glue_ctx))
        return -1;
    return add_globals(glue_ctx);
}

EXPORT(qjs_get_context)
JSContext *qjs_get_context(void)
{
    return glue_ctx;
}

// The node side of the differential suite: runs guest sources exactly as the sandbox
// composes them, each in a fresh vm context, one after another, and hands every host
// call to the Python broker behind ENDPOINT (tests/differential/harness.py).
//
// stdin: one JSON object a line, {"id": ..., "source": ...}; stdout: one JSON object a
// line, {"id", "stdout", "stderr", "exit_code"}. Started with --experimental-vm-modules
// so each source is an ES module, as in the sandbox (top-level await, `import "qjs:os"`).
//
// Everything that makes this context look like the sandbox's is in `sandboxGlobals` and
// `qjsModule` below (with `quickjsBytes` and `qjsFormat`, which they use), and nowhere
// else; what the sandbox differs in by design is listed in harness.py (BY_DESIGN).
import vm from "node:vm";
import readline from "node:readline";
import { types } from "node:util";
import { Worker } from "node:worker_threads";

const ENDPOINT = process.argv[2];
// The TypeError's message for a host call without an envelope (runtime/messages.py).
const ENVELOPE_REQUIRED = process.argv[3];
// A run still busy after this many seconds ends with 124, as the sandbox's does.
const TIMEOUT_MS = Number(process.argv[4]) * 1000;
const EXIT_TIMEOUT = 124;
// The largest reply body the bridge hands over (harness.py MAX_REPLY_BYTES), and room for
// the rest of a blocking call's reply (its headers JSON is at most 64 KiB, base64 in transit).
const BODY_ROOM = 4 << 20;
const META_ROOM = 256 << 10;

// The blocking `__coderunner_host_call`: node has no synchronous HTTP, so a worker does
// the request and the main thread sleeps in Atomics.wait until it has written the reply:
// the status, the body's length and the length of the reply's other parts (JSON: type,
// binary, headers) in the first 12 bytes, the body after them, those parts after its room.
const BLOCKING_WORKER = `
const { parentPort } = require("node:worker_threads");
parentPort.on("message", async ({ url, frame, shared }) => {
  const flag = new Int32Array(shared, 0, 3);
  let status = 500, bytes = new Uint8Array(0), meta = "{}";
  try {
    const res = await fetch(url, { method: "POST", body: frame.body, headers: frame.headers });
    status = Number(res.headers.get("x-host-status"));
    bytes = new Uint8Array(await res.arrayBuffer());
    meta = JSON.stringify({
      type: res.headers.get("x-host-type") || "",
      binary: res.headers.get("x-host-binary") === "1",
      headers: res.headers.get("x-host-headers"),
    });
  } catch (e) {}
  const room = new Uint8Array(shared, 12, ${BODY_ROOM});
  const n = Math.min(bytes.length, room.length);
  room.set(bytes.subarray(0, n));
  const encoded = new TextEncoder().encode(meta);
  new Uint8Array(shared, 12 + ${BODY_ROOM}).set(encoded);
  flag[1] = n;
  flag[2] = encoded.length;
  Atomics.store(flag, 0, status);
  Atomics.notify(flag, 0);
});`;
const blocking = new Worker(BLOCKING_WORKER, { eval: true });
blocking.unref();
const SHARED = new SharedArrayBuffer(12 + BODY_ROOM + META_ROOM);

function blockingCall(url, frame) {
  const flag = new Int32Array(SHARED, 0, 3);
  Atomics.store(flag, 0, 0);
  blocking.postMessage({ url, frame, shared: SHARED });
  Atomics.wait(flag, 0, 0);
  const body = new Uint8Array(SHARED, 12, flag[1]).slice();
  const meta = JSON.parse(Buffer.from(new Uint8Array(SHARED, 12 + BODY_ROOM, flag[2])).toString("utf8"));
  return { status: Atomics.load(flag, 0), body, ...meta };
}

// The host call's second argument as the bridge reads it (bridge._read_payload), without
// running guest code (host-realm checks and getters, which a guest cannot replace):
// undefined or absent is none, a string its UTF-8 as node's fetch and TextEncoder send
// it (a lone surrogate is U+FFFD), a Uint8Array (not a detached one) its bytes; anything
// else is refused as invalid.
const typedArrayProto = Object.getPrototypeOf(Uint8Array.prototype);
const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
const bufferOf = getter(typedArrayProto, "buffer");
const offsetOf = getter(typedArrayProto, "byteOffset");
const lengthOf = getter(typedArrayProto, "byteLength");
const detached = getter(ArrayBuffer.prototype, "detached");

function payloadOf(args) {
  if (args.length < 2 || args[1] === undefined) return { kind: "none" };
  const v = args[1];
  if (typeof v === "string") return { kind: "bytes", bytes: new TextEncoder().encode(v) };
  if (!types.isUint8Array(v)) return { kind: "invalid" };
  const buffer = bufferOf.call(v);
  if (types.isArrayBuffer(buffer) && detached.call(buffer)) return { kind: "invalid" };
  return { kind: "bytes", bytes: new Uint8Array(buffer, offsetOf.call(v), lengthOf.call(v)).slice() };
}

// One host call as the endpoint reads it: the envelope's bytes, then the payload's.
function frameOf(text, payload) {
  const envelope = quickjsBytes(text);
  const extra = payload.kind === "bytes" ? payload.bytes : new Uint8Array(0);
  const body = new Uint8Array(envelope.length + extra.length);
  body.set(envelope);
  body.set(extra, envelope.length);
  return {
    body,
    headers: { "x-envelope-length": String(envelope.length), "x-payload": payload.kind },
  };
}

// A reply body as the guest gets it: bytes stay bytes, text is decoded as TextDecoder
// does (one U+FFFD per maximal ill-formed subpart) but keeps a leading BOM, as the
// bridge's JS_NewStringLen does.
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });
function replyParts(status, bytes, type, binary, headers) {
  return {
    status,
    body: binary ? bytes : utf8.decode(bytes),
    type,
    binary,
    headers: headers == null ? undefined : Buffer.from(headers, "base64").toString("utf8"),
  };
}

// The envelope's bytes as the sandbox reads them (JS_ToCStringLen): UTF-8, except that a
// lone surrogate becomes its own three bytes, which are not UTF-8, so the envelope
// decoder refuses the call there. fetch would send U+FFFD for it instead.
function quickjsBytes(text) {
  const out = [];
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8Array(out);
}

// QuickJS's console.log and print write ToString of each argument joined by one space
// ("[object Object]" for an object, "<exception>" when ToString throws, as for a
// Symbol); node's console.log would inspect objects instead.
function qjsFormat(args) {
  return args
    .map((a) => {
      try {
        return `${a}`;
      } catch (e) {
        return "<exception>";
      }
    })
    .join(" ");
}

class Run {
  constructor(id) {
    this.id = id;
    this.out = [];
    this.err = [];
    this.pending = 0; // timers and host calls not yet settled
    this.timers = new Set();
    this.failed = null; // an exception thrown by a timer callback ends the run
    this.rejections = new Set();
    this.done = false;
    this.wake = null;
  }
  settleOne() {
    this.pending--;
    if (this.wake) this.wake();
  }
  idle() {
    if (this.pending <= 0 || this.failed) return Promise.resolve();
    return new Promise((r) => {
      this.wake = () => {
        if (this.pending <= 0 || this.failed) {
          this.wake = null;
          r();
        }
      };
    });
  }
}

function sandboxGlobals(run, context) {
  const write = (...args) => {
    if (!run.done) run.out.push(qjsFormat(args) + "\n");
  };
  const url = `${ENDPOINT}/run/${encodeURIComponent(run.id)}`;
  // The reply object and the promise are made inside the guest's realm, as the sandbox
  // makes them, so `instanceof Object` and prototype lookups answer as they do there.
  // The reply is the bridge's (bridge._reply_object): own data properties `status` and
  // `body`, a non-enumerable `type`, and a non-enumerable `headers` only when the upstream
  // answered; defined, not assigned, so a setter on Object.prototype sees none of them.
  // A binary body is a Uint8Array of the guest's realm.
  const makeReply = vm.runInContext(
    `(function () {
       var define = Object.defineProperty;
       return function reply(p) {
         var o = {};
         var body = p.body;
         if (p.binary) { body = new Uint8Array(p.body.length); body.set(p.body); }
         define(o, "status", {value: p.status, writable: true, enumerable: true, configurable: true});
         define(o, "body", {value: body, writable: true, enumerable: true, configurable: true});
         define(o, "type", {value: p.type, writable: true, enumerable: false, configurable: true});
         if (p.headers !== undefined) {
           define(o, "headers", {value: p.headers, writable: true, enumerable: false, configurable: true});
         }
         return o;
       };
     })()`,
    context,
  );
  const makeStart = vm.runInContext(
    `(function (send, reply, required) {
       return function __coderunner_host_start(envelope) {
         if (arguments.length < 1) throw new TypeError(required);
         var text = String(envelope);
         var frame = send.frame(text, arguments);
         return new Promise(function (resolve, reject) {
           send(frame, function (parts) { resolve(reply(parts)); });
         });
       };
     })`,
    context,
  );
  const makeCall = vm.runInContext(
    `(function (call, reply, required) {
       return function __coderunner_host_call(envelope) {
         if (arguments.length < 1) throw new TypeError(required);
         var text = String(envelope);
         return reply(call(text, arguments));
       };
     })`,
    context,
  );
  const send = (frame, resolve) => {
    run.pending++;
    fetch(url + "/start", { method: "POST", body: frame.body, headers: frame.headers })
      .then(async (res) => {
        const h = (name) => res.headers.get(name);
        const bytes = new Uint8Array(await res.arrayBuffer());
        return replyParts(Number(h("x-host-status")), bytes, h("x-host-type") || "", h("x-host-binary") === "1", h("x-host-headers"));
      })
      .catch(() => replyParts(500, new Uint8Array(0), "", false, null))
      .then((parts) => {
        if (!run.done) resolve(parts);
        run.settleOne();
      });
  };
  send.frame = (text, args) => frameOf(text, payloadOf(args));
  const timer = (fn, ms, repeat) => {
    run.pending++;
    const handle = { id: null, live: true };
    const fire = () => {
      if (run.done || !handle.live) return;
      if (!repeat) {
        handle.live = false;
        run.timers.delete(handle);
      }
      try {
        fn();
      } catch (e) {
        run.failed = run.failed || e;
        if (run.wake) run.wake();
      }
      if (!repeat) run.settleOne();
    };
    handle.id = repeat ? setInterval(fire, ms) : setTimeout(fire, ms);
    run.timers.add(handle);
    return handle;
  };
  const clear = (handle) => {
    if (handle && handle.live && run.timers.has(handle)) {
      handle.live = false;
      clearTimeout(handle.id);
      clearInterval(handle.id);
      run.timers.delete(handle);
      run.settleOne();
    }
  };
  const os = {
    setTimeout: (fn, ms) => timer(fn, ms, false),
    clearTimeout: clear,
    setInterval: (fn, ms) => timer(fn, ms, true),
    clearInterval: clear,
    sleepAsync: vm.runInContext(
      `(function (t) { return function sleepAsync(ms) { return new Promise(function (r) { t(r, ms); }); }; })`,
      context,
    )((fn, ms) => timer(fn, ms, false)),
  };
  // The sandbox's globals node's vm context lacks (print, atob/btoa, queueMicrotask) and
  // its host functions; the shared SHIMS line then aliases console.error & co. to log.
  // Intl is removed so that the SHIMS' en-US stand-in installs here too, as it does in
  // the sandbox, whose QuickJS build has no Intl.
  context.console = vm.runInContext("({})", context);
  context.console.log = write;
  context.print = write;
  context.atob = atob;
  context.btoa = btoa;
  context.queueMicrotask = queueMicrotask;
  context.__coderunner_host_start = makeStart(send, makeReply, ENVELOPE_REQUIRED);
  context.__coderunner_host_call = makeCall(
    (text, args) => {
      const r = blockingCall(url + "/call", frameOf(text, payloadOf(args)));
      return replyParts(r.status, r.body, r.type, r.binary, r.headers);
    },
    makeReply,
    ENVELOPE_REQUIRED,
  );
  vm.runInContext("delete globalThis.Intl;", context);
  // The client sends a multipart file's bytes as {base64} with Uint8Array#toBase64, which
  // QuickJS-NG has and node 24 lacks: the proposal's method (its two options included),
  // installed as a builtin is (writable, configurable, not enumerable).
  vm.runInContext(
    `Object.defineProperty(Uint8Array.prototype, "toBase64", {
       value: function toBase64() {
         var options = arguments[0];
         if (!(this instanceof Uint8Array)) throw new TypeError("not a Uint8Array");
         var o = options === undefined ? {} : options;
         var alphabet = o.alphabet === undefined ? "base64" : o.alphabet;
         if (alphabet !== "base64" && alphabet !== "base64url") throw new TypeError("bad alphabet");
         var s = "";
         for (var i = 0; i < this.length; i++) s += String.fromCharCode(this[i]);
         var out = btoa(s);
         if (alphabet === "base64url") out = out.split("+").join("-").split("/").join("_");
         if (o.omitPadding) out = out.split("=").join("");
         return out;
       },
       writable: true, enumerable: false, configurable: true,
     });`,
    context,
  );
  return os;
}

// The `qjs:` modules programs may import, as the sandbox's QuickJS provides them
// (only the names the programs use).
function qjsModule(specifier, os, context) {
  if (specifier === "qjs:os") {
    const names = Object.keys(os);
    return new vm.SyntheticModule(
      names,
      function () {
        for (const n of names) this.setExport(n, os[n]);
      },
      { context, identifier: specifier },
    );
  }
  throw new Error(`module ${JSON.stringify(specifier)} is not provided to the node side`);
}

let current = null;
process.on("unhandledRejection", (reason, promise) => {
  if (current && !current.done) current.rejections.add(promise);
});
process.on("rejectionHandled", (promise) => {
  if (current) current.rejections.delete(promise);
});

const macrotask = () => new Promise((r) => setImmediate(r));
const TIMED_OUT = Symbol("timed out");

async function runOne(id, source) {
  const run = new Run(id);
  current = run;
  const context = vm.createContext({});
  const os = sandboxGlobals(run, context);
  let exit = 0;
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), TIMEOUT_MS);
  });
  try {
    const mod = new vm.SourceTextModule(source, { context, identifier: "<cmdline>" });
    await mod.link((specifier) => qjsModule(specifier, os, context));
    const ended = await Promise.race([mod.evaluate({ timeout: TIMEOUT_MS }).then(() => run.idle()), timedOut]);
    if (ended === TIMED_OUT) throw TIMED_OUT;
    if (run.failed) throw run.failed;
    // Let node report rejections nobody handled, as the sandbox does when its loop ends.
    await macrotask();
    await macrotask();
    if (run.rejections.size) {
      run.err.push("Possibly unhandled promise rejection\n");
      exit = 1;
    }
  } catch (e) {
    // A synchronous loop is cut off by evaluate's own timeout (ERR_SCRIPT_EXECUTION_TIMEOUT).
    if (e && e.code === "ERR_SCRIPT_EXECUTION_TIMEOUT") e = TIMED_OUT;
    run.err.push(e === TIMED_OUT ? "timed out\n" : String(e && e.stack ? e.stack : e) + "\n");
    exit = e === TIMED_OUT ? EXIT_TIMEOUT : 1;
  }
  clearTimeout(timer);
  run.done = true;
  for (const handle of run.timers) {
    clearTimeout(handle.id);
    clearInterval(handle.id);
  }
  // As node writes text to a stream: a lone surrogate becomes U+FFFD.
  const stdout = run.out.join("").toWellFormed();
  return { id, stdout, stderr: run.err.join("").toWellFormed(), exit_code: exit };
}

const lines = readline.createInterface({ input: process.stdin });
const queue = [];
let busy = false;
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const { id, source } = JSON.parse(queue.shift());
    const result = await runOne(id, source);
    process.stdout.write(JSON.stringify(result) + "\n");
  }
  busy = false;
}
lines.on("line", (line) => {
  queue.push(line);
  pump();
});

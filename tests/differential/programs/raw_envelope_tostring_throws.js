const bad = { toString() { throw new RangeError("no string for you"); } };
try { __coderunner_host_call(bad); } catch (e) { console.log("call", e.name, e.message); }
try { __coderunner_host_start(bad); } catch (e) { console.log("start", e.name, e.message); }
console.log("still running");

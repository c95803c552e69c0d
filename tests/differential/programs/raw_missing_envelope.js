try { __coderunner_host_call(); } catch (e) { console.log("call", e.name, e.message); }
try { __coderunner_host_start(); console.log("no throw"); } catch (e) { console.log("start", e.name, e.message); }
const r = __coderunner_host_call(undefined);
console.log(r.status);

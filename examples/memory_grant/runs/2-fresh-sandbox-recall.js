var A = "00000000000000000000000000000042", NS = "support-agent", ME = "customer-42";
memory.agent_memory_recall(A, NS, ME, {query: "What language should replies use?"}).then(
  function (r) { console.log(r.result.count + " memory found: " + r.result.answer); },
  function (e) { console.log("failed: " + e.message); });
console.log("left over from the first run: " + (typeof globalThis.lastStored));

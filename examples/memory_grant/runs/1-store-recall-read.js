var A = "00000000000000000000000000000042", NS = "support-agent", ME = "customer-42";
memory.agent_memory_remember(A, NS, ME, {content: "The customer wants replies in Spanish.", sessionId: "chat-7"})
  .then(function (r) {
    console.log("stored " + r.result.id);
    globalThis.lastStored = r.result.id;
    return memory.agent_memory_recall(A, NS, ME, {query: "Which language does the customer want?"});
  })
  .then(function (r) {
    console.log("recalled: " + r.result.answer);
    return memory.agent_memory_memory_get(A, NS, ME, r.result.candidates[0].id);
  })
  .then(function (r) { console.log("read back by ID: " + r.result.content); },
        function (e) { console.log("failed: " + e.message); });

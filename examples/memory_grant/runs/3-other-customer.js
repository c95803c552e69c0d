var A = "00000000000000000000000000000042", NS = "support-agent", ME = "customer-42";
var Q = {query: "Which language does the customer want?"};
memory.agent_memory_recall(A, NS, "customer-43", Q).then(
  function (r) { console.log("client answered: " + JSON.stringify(r)); },
  function (e) {
    console.log("client refused: " + e.message);
    var raw = __coderunner_host_call(JSON.stringify({method: "POST",
      path: "/client/v4/accounts/" + A + "/agent-memory/namespaces/" + NS + "/profiles/customer-43/recall", body: Q}));
    console.log("broker answered: " + raw.status + " " + raw.body);
  });

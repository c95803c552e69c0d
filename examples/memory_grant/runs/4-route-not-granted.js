var A = "00000000000000000000000000000042", NS = "support-agent", ME = "customer-42";
memory.agent_memory_namespace_delete(A, NS).then(
  function (r) { console.log("client answered: " + JSON.stringify(r)); },
  function (e) {
    console.log("client refused: " + e.message);
    var raw = __coderunner_host_call(JSON.stringify({method: "DELETE",
      path: "/client/v4/accounts/" + A + "/agent-memory/namespaces/" + NS}));
    console.log("broker answered: " + raw.status + " " + raw.body);
  });

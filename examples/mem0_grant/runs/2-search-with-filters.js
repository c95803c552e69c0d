mem0.memories_search_v2({query: "Which food is Alice allergic to?",
                         filters: {user_id: "alice", metadata: {topic: "food"}}, top_k: 5})
  .then(function (found) {
    console.log(found.length + " memories about food:");
    found.forEach(function (m) { console.log("  " + m.score + " " + m.memory); });
  }, function (e) { console.log("failed: " + e.message); });

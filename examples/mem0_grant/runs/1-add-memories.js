var ME = "alice";
mem0.memories_create({user_id: ME, metadata: {topic: "food"}, messages: [
    {role: "user", content: "Alice is vegetarian."},
    {role: "assistant", content: "Noted: no meat."},
    {role: "user", content: "Alice is allergic to nuts."}]})
  .then(function (r) {
    console.log("food: " + r[0].status + " event " + r[0].event_id);
    return mem0.memories_create({user_id: ME, metadata: {topic: "travel"},
      messages: [{role: "user", content: "Alice moves to Lisbon in March."}]});
  })
  .then(function (r) { console.log("travel: " + r[0].status + " event " + r[0].event_id); },
        function (e) { console.log("failed: " + e.message); });

// The same list for another customer: the grant pins user_id to alice.
mem0.memories_list({user_id: "bob", page: 1, page_size: 2}).then(
  function (r) { console.log("listed: " + JSON.stringify(r)); },
  function (e) { console.log("refused: " + e.message); });

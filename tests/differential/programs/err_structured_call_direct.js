const r = await shop.call({ method: "GET", route: "/v1/items/*" }, ["direct"]);
console.log(r.id);

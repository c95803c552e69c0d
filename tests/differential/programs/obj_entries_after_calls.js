const state = {};
await shop.getItem("q1");
await shop.getItem("q2");
state.done = true;
console.log(JSON.stringify(Object.entries(state)));

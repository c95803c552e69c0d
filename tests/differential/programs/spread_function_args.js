const ids = ["f1", "f2", "f3"];
function fetchAll(...xs) { return Promise.all(xs.map((x) => shop.getItem(x))); }
const got = await fetchAll(...ids);
console.log(got.length, Math.max(...got.map((g) => g.price)));

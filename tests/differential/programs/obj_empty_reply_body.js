const e = await shop.getItem("empty");
console.log(JSON.stringify(e), Object.keys(e).length);

const dict = Object.create(null);
await shop.getItem("d");
dict.a = 1;
console.log(JSON.stringify(dict), Object.keys(dict).join());

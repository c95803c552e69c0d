const o = { a: 1, b: 2 };
await shop.getItem("del");
delete o.a;
o.c = 3;
console.log(JSON.stringify(o));

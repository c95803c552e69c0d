const c = {};
await shop.getItem("im");
c.x++;
c.y = (c.y | 0) + 1;
console.log(JSON.stringify(c), Number.isNaN(c.x));

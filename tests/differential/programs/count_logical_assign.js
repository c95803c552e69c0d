const o = {};
await shop.getStats();
o.a ||= 1; o.a ||= 2; o.b ??= 3; o.c = 0; o.c &&= 5; o.d = 1; o.d &&= 7;
console.log(JSON.stringify(o));

let [a, b] = await Promise.all([shop.getItem("sw1"), shop.getItem("sw2")]);
[a, b] = [b, a];
console.log(a.id, b.id);

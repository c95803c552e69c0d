const first = await Promise.race([shop.getItem("r1"), new Promise(() => {})]);
console.log(first.id);

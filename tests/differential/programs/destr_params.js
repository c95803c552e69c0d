async function price({ id, price = 0 }, { currency = "USD" } = {}) { return `${id} ${price} ${currency}`; }
const it = await shop.getItem("dpar");
console.log(await price(it), await price(it, { currency: "EUR" }));

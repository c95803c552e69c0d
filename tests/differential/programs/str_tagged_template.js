function money(strings, ...vals) { return strings.reduce((s, str, i) => s + str + (i < vals.length ? "$" + Number(vals[i]).toFixed(2) : ""), ""); }
const it = await shop.getItem("tt");
console.log(money`Price ${it.price} and double ${it.price * 2}.`);

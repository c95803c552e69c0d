const parsed = JSON.parse("{}");
await shop.getItem("j");
parsed.filled = true;
console.log(JSON.stringify(parsed));

const it = await shop.getItem("rt");
const text = JSON.stringify(it);
const back = JSON.parse(text);
console.log(JSON.stringify(back) === text, text.length);

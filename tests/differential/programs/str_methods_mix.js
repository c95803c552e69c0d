const it = await shop.getItem("sm");
const s = it.name;
console.log(s.toUpperCase(), s.at(-1), s.includes("item"), s.startsWith("it"), s.endsWith("sm"), s.indexOf(" "), s.slice(-2), s.substring(1, 3));

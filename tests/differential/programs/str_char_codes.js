const it = await shop.getItem("cc");
console.log([...it.id].map((c) => c.charCodeAt(0)).join(","), String.fromCharCode(72, 105), "😀".codePointAt(0), String.fromCodePoint(9731));

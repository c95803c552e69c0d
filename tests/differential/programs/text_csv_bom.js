// A CSV with a byte order mark keeps it as U+FEFF at the start of the string.
const csv = await shop.getReport("bom-1");
console.log(csv.length, csv.charCodeAt(0).toString(16), csv.startsWith("id"));
const clean = csv.replace(/^\uFEFF/, "");
console.log(clean.split("\r\n")[0].split(",").join("|"));

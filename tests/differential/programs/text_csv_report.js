// A CSV reply is a string; split it into rows, with a quoted comma.
const csv = await shop.getReport("r1");
console.log(typeof csv, JSON.stringify(csv));
const rows = csv.trim().split("\r\n").map((l) => l.match(/("[^"]*"|[^,]+)/g));
console.log(JSON.stringify(rows));

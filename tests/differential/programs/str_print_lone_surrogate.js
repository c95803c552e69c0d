const it = await shop.getItem("ls");
const broken = it.name.slice(0, 2) + "\ud83d" + "|" + "\ude00" + "|" + "\ud83d\ude00";
console.log(broken, broken.length, broken.isWellFormed());
console.log(broken.toWellFormed());
